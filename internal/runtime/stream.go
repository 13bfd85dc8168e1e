package runtime

import (
	"context"
	"sync"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
)

// This file holds the streaming of model answers (REFERENCE §2.2, §3.4):
// a run submitted with stream, whose provider streams and whose agent has
// no response middleware, commits each text and thinking piece as a
// text_delta / thinking_delta event through delta-only commits (events
// and their `event` records, no checkpoint) while the call runs.

// streamer returns the provider as a model.Streamer when this run's model
// calls stream: the run streams, the provider can, and the agent has no
// response middleware (its text is buffered and emitted post-middleware
// after the call, REFERENCE §10.1 note).
func (d *driver) streamer() (model.Streamer, bool) {
	if !d.st.Stream || len(d.b.def.ResponseMiddleware) > 0 {
		return nil, false
	}
	s, ok := d.modelProvider().(model.Streamer)
	return s, ok
}

// deltaCommitError is a delta commit of a streamed call that failed for
// good: the call was stopped, and cmdModel returns err as the commit
// failure it is (not as a model failure).
type deltaCommitError struct{ err error }

func (e *deltaCommitError) Error() string { return "commit streamed deltas: " + e.err.Error() }
func (e *deltaCommitError) Unwrap() error { return e.err }

// callModel makes the provider call of a model attempt whose model.started
// is committed. streamed reports that the answer's text went out as delta
// events during the call; otherwise cmdModel emits it after the call.
// Every delta of the attempt is committed (or, when a delta commit failed
// or the drive stopped, pending in d's boundary, in order) when it returns.
func (d *driver) callModel(ctx context.Context, req *model.Request) (resp *model.Response, streamed bool, err error) {
	s, ok := d.streamer()
	if !ok {
		resp, err = d.modelProvider().Complete(ctx, req)
		return resp, false, err
	}
	callCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	ds := newDeltaStream(d, stop)
	go ds.run(callCtx)
	resp, err = s.CompleteStream(callCtx, req, ds.add)
	if ferr := ds.close(); ferr != nil {
		if ctx.Err() != nil {
			// The drive stops anyway; its last commit carries the deltas.
			return nil, true, ctx.Err()
		}
		return nil, true, &deltaCommitError{err: ferr}
	}
	return resp, true, err
}

// deltaStream commits the deltas of one streamed call. The provider's
// goroutine (the driver's) adds them; a flusher goroutine commits what has
// accumulated, one delta-only commit at a time, so a burst of tokens
// arriving during a commit goes out in the next one. Each piece is an
// event of its own, as the provider sent it. Events are built (ids, data)
// on the driver's goroutine; the flusher only commits them.
type deltaStream struct {
	d    *driver
	c    committer // the flusher's: same run, lease and storage waits
	stop context.CancelCauseFunc

	mu     sync.Mutex
	queue  []rtstore.PendingEvent // not yet taken by the flusher
	closed bool
	failed error                  // a delta commit failed for good
	unsent []rtstore.PendingEvent // of the failed commit and after it

	wake chan struct{}
	done chan struct{}
}

func newDeltaStream(d *driver, stop context.CancelCauseFunc) *deltaStream {
	return &deltaStream{
		d:    d,
		c:    committer{r: d.r, st: d.st, lease: d.lease, wait: d.wait},
		stop: stop,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// add queues one delta (the provider's onDelta). It never blocks on
// storage.
func (ds *deltaStream) add(delta model.Delta) {
	typ := EventTextDelta
	if delta.Kind == model.DeltaThinking {
		typ = EventThinkingDelta
	} else if delta.Kind != model.DeltaText {
		return
	}
	if delta.Text == "" {
		return
	}
	ev := ds.d.newEvent(typ, delta.Text, nil)
	ds.mu.Lock()
	ds.queue = append(ds.queue, ev)
	ds.mu.Unlock()
	select {
	case ds.wake <- struct{}{}:
	default:
	}
}

// takeLocked returns the queued events and empties the queue. ds.mu is
// held.
func (ds *deltaStream) takeLocked() []rtstore.PendingEvent {
	batch := ds.queue
	ds.queue = nil
	return batch
}

// run is the flusher: it commits what is queued until the stream is
// closed and drained, or a commit fails for good (it then stops the call).
func (ds *deltaStream) run(ctx context.Context) {
	defer close(ds.done)
	for {
		ds.mu.Lock()
		batch := ds.takeLocked()
		closed := ds.closed
		ds.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-ds.wake
			continue
		}
		if err := ds.commit(ctx, batch); err != nil {
			ds.mu.Lock()
			ds.failed = err
			ds.unsent = batch
			ds.mu.Unlock()
			ds.stop(err)
			return
		}
	}
}

// commit writes batch as one delta-only commit with the commit's tries
// (and storage waits); on success it wakes the run's watchers and reports
// the commit to AfterCommitFunc as [event].
func (ds *deltaStream) commit(ctx context.Context, batch []rtstore.PendingEvent) error {
	st := ds.c.st
	cm := &rtstore.Commit{SessionID: st.SessionID, RunID: st.RunID, Lease: ds.c.lease, DeltaOnly: true, Events: batch}
	if err := ds.c.write(ctx, func(ctx context.Context) error { return ds.c.r.store.Commit(ctx, cm) }); err != nil {
		return err
	}
	ds.c.r.notify.wake(st.RunID)
	if f := ds.c.r.cfg.AfterCommitFunc; f != nil {
		f([]journal.Kind{journal.KindEvent})
	}
	return nil
}

// close waits until every queued delta is committed. When a delta commit
// failed, the events not committed go back into the driver's boundary, in
// order (the next commit, the one that settles the failure, carries them)
// and the failure is returned.
func (ds *deltaStream) close() error {
	ds.mu.Lock()
	ds.closed = true
	ds.mu.Unlock()
	select {
	case ds.wake <- struct{}{}:
	default:
	}
	<-ds.done
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.failed == nil {
		return nil
	}
	ds.d.events = append(ds.d.events, ds.unsent...)
	ds.d.events = append(ds.d.events, ds.takeLocked()...)
	return ds.failed
}
