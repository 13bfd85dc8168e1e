package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlNotifyRuns wakes event readers (ListenEvents) of the schema: one
// notification per run id, payload the run id.
const sqlNotifyRuns = `SELECT pg_notify($1, r) FROM unnest($2::text[]) AS r`

// notifier sends the NOTIFYs of committed event appends from one goroutine,
// after the commits and outside their transactions. A NOTIFY inside a
// commit would serialise every committing transaction of the database
// (PostgreSQL holds a global lock from the NOTIFY's pre-commit until the
// commit is flushed), which defeats group commit; a NOTIFY-only
// transaction writes no WAL and costs one short round trip, and the run
// ids that pile up while one is in flight go out together in the next.
// Notifications are wake-up hints: one lost to a crash between commit and
// NOTIFY only delays readers until they poll.
type notifier struct {
	s    *Store
	wake chan struct{} // capacity 1: "pending is not empty"
	stop chan struct{} // closed by close
	done chan struct{} // closed when the goroutine ends

	mu      sync.Mutex
	pending map[string]struct{}
}

func newNotifier(s *Store) *notifier {
	n := &notifier{
		s:       s,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: make(map[string]struct{}),
	}
	go n.loop()
	return n
}

// add queues a notification for runID.
func (n *notifier) add(runID string) {
	n.mu.Lock()
	n.pending[runID] = struct{}{}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.wake:
			n.flush()
		case <-n.stop:
			n.flush()
			return
		}
	}
}

// flush sends every pending notification in one statement.
func (n *notifier) flush() {
	n.mu.Lock()
	if len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(n.pending))
	for id := range n.pending {
		ids = append(ids, id)
	}
	clear(n.pending)
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.s.pool.Exec(ctx, sqlNotifyRuns, n.s.channel, ids); err != nil {
		n.s.logger.WarnContext(ctx, "cannot notify event listeners; they catch up when they poll",
			"runs", len(ids), "error", n.s.mapErr(ctx, "notify", err))
	}
}

// close sends what is pending and stops the goroutine.
func (n *notifier) close() {
	close(n.stop)
	<-n.done
}

// Reconnect backoff of ListenEvents.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// ListenEvents calls fn with the run id of every committed Commit or
// RunInsert that appended events to this schema (any process), shortly
// after the commit, until ctx ends; then it returns ctx's error. It holds one connection of its own
// (outside the pool) with LISTEN on the schema's channel. When that
// connection fails it reconnects with backoff (100ms doubling to 5s) for
// as long as ctx lasts.
//
// fn runs on ListenEvents' goroutine and must not block for long. A run id
// may arrive more than once (one notification per committing transaction);
// notifications sent while no connection listens are lost, so fn is
// called with "" after every (re)connection, the first included: "anything
// may have changed, look again". An event reader therefore polls
// EventListAfter once when woken, for the run named or, on "", for every
// run it follows.
//
// Close stops it: it then returns an error wrapping rtstore.ErrUnavailable
// (at once if the Store is already closed).
func (s *Store) ListenEvents(ctx context.Context, fn func(runID string)) error {
	const op = "listen for events"
	if err := s.checkOpen(op); err != nil {
		return err
	}
	// Close stops the listener too.
	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := listenBackoffMin
	for {
		start := time.Now()
		err := s.listenOnce(ctx, fn)
		if s.closed.Load() {
			return s.checkOpen(op)
		}
		if outer.Err() != nil {
			return fmt.Errorf("%s: %w", op, outer.Err())
		}
		if time.Since(start) > listenBackoffMax {
			backoff = listenBackoffMin // it worked for a while: start over
		}
		s.logger.WarnContext(ctx, "event listener lost its connection; reconnecting",
			"error", s.mapErr(ctx, op, err), "retry_in", backoff)
		select {
		case <-ctx.Done():
			if s.closed.Load() {
				return s.checkOpen(op)
			}
			return fmt.Errorf("%s: %w", op, outer.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context, fn func(runID string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(s.channel)); err != nil {
		return err
	}
	fn("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == s.channel {
			fn(n.Payload)
		}
	}
}
