package http_test

import (
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hxhttp "hxd/internal/http"
	hxruntime "hxd/internal/runtime"
)

// laggyService is a fakeService whose events lag the run status, like the
// Temporal engine's (it implements EventLag).
type laggyService struct {
	*fakeService
	lag time.Duration
}

func (l laggyService) EventLag() time.Duration { return l.lag }

func withLag(lag time.Duration) func(*hxhttp.Config) {
	return func(c *hxhttp.Config) { c.Service = laggyService{fakeService: c.Service.(*fakeService), lag: lag} }
}

// TestEventStreamWaitsForLaggingRunResult: the run is already completed
// when its run_result event arrives; the stream waits for it instead of
// ending after the events it had.
func TestEventStreamWaitsForLaggingRunResult(t *testing.T) {
	t.Parallel()
	tb := setup(t, withLag(10*time.Second))
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusCompleted, hxruntime.EventTextDelta) // status first, run_result later

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	br := openStream(t, tb, ctx)
	f, err := readFrame(br)
	require.NoError(t, err)
	require.Equal(t, "text_delta", f.event)

	go func() {
		time.Sleep(100 * time.Millisecond)
		run.commit(hxruntime.StatusCompleted, hxruntime.EventRunResult)
	}()
	f, err = readFrame(br)
	require.NoError(t, err)
	require.Equal(t, "run_result", f.event)
	_, err = readFrame(br)
	require.ErrorIs(t, err, io.EOF)
}

// TestEventStreamLagIsBounded: a run_result that never comes ends the
// stream after the lag.
func TestEventStreamLagIsBounded(t *testing.T) {
	t.Parallel()
	tb := setup(t, withLag(200*time.Millisecond))
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	run.commit(hxruntime.StatusCompleted, hxruntime.EventTextDelta)
	// Wake the stream now and then, as the Temporal engine's poll does.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				run.commit(hxruntime.StatusCompleted)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	br := openStream(t, tb, ctx)
	f, err := readFrame(br)
	require.NoError(t, err)
	require.Equal(t, "text_delta", f.event)
	_, err = readFrame(br)
	require.ErrorIs(t, err, io.EOF)
}

// TestEventStreamGapOnce: an event source that answers every read with a
// gap event (cursor 0: Redis unreachable) streams it once; the stream of
// the stopped run then ends without waiting for a run_result.
func TestEventStreamGapOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, withLag(time.Minute))
	run := newFakeRun(tb.svc, hxruntime.StatusRunning)
	var reads atomic.Int32
	tb.svc.ListEventsFunc = func(_ context.Context, _ string, _ int64, _ int) ([]hxruntime.RunEvent, error) {
		if reads.Add(1) == 3 {
			run.commit(hxruntime.StatusCompleted)
		}
		return []hxruntime.RunEvent{{
			Type: hxruntime.EventGap, Data: json.RawMessage(`{"reason":"event_history_unavailable"}`),
			SessionID: "s1", RunID: "r1", EventID: "gap", Cursor: "0",
		}}, nil
	}
	// Wake the stream now and then, as the Temporal engine's poll does.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				run.commit(run.currentStatus())
			}
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	br := openStream(t, tb, ctx)
	f, err := readFrame(br)
	require.NoError(t, err)
	require.Equal(t, frame{id: "0", event: "gap", data: f.data}, f)
	_, err = readFrame(br)
	require.ErrorIs(t, err, io.EOF, "one gap frame, then the end of the stopped run's stream")
	require.GreaterOrEqual(t, reads.Load(), int32(3))
}

func (r *fakeRun) currentStatus() hxruntime.RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}
