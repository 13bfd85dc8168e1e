package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNotifierForgetsUnwatchedRuns: a run's entry lives while someone
// watches it; watches that end without a wake (a stream's last pass, a
// wait that returned) leave nothing behind.
func TestNotifierForgetsUnwatchedRuns(t *testing.T) {
	t.Parallel()
	n := notifier{chans: map[string]*watchers{}}
	_, doneA := n.watch("r1")
	_, doneB := n.watch("r1")
	_, doneC := n.watch("r2")
	require.Equal(t, 2, n.watched())
	doneA()
	doneA() // idempotent
	require.Equal(t, 2, n.watched(), "r1 still has a watcher")
	doneB()
	doneC()
	require.Zero(t, n.watched())

	// A wake closes the channel every watcher holds and drops the entry;
	// ending those watches afterwards touches nothing new.
	a, doneA := n.watch("r1")
	b, doneB := n.watch("r1")
	n.wake("r1")
	<-a
	<-b
	c, doneC := n.watch("r1") // a new watch of the next commit
	doneA()
	doneB()
	require.Equal(t, 1, n.watched())
	select {
	case <-c:
		t.Fatal("the new watch was woken by an old one's end")
	default:
	}
	doneC()
	require.Zero(t, n.watched())
}

// TestWatchRunLeavesNothingBehind: every WatchRun, released or left to
// time out, ends its watch.
func TestWatchRunLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	r := &Runtime{cfg: Config{WatchPoll: 10 * time.Millisecond}, notify: notifier{chans: map[string]*watchers{}}}
	for i := range 100 {
		_, release := r.WatchRun(string(rune('a' + i%26)))
		if i%2 == 0 {
			release()
		}
	}
	require.Eventually(t, func() bool { return r.notify.watched() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestSubmitTurn: one submission of a session holds the turn at a time,
// the next gets it when the first releases it, a waiter whose context ends
// gives up, and the session's entry goes with its last submission.
func TestSubmitTurn(t *testing.T) {
	t.Parallel()
	r := &Runtime{submits: map[string]*submitTurn{}}
	release, err := r.takeSubmitTurn(context.Background(), "s")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = r.takeSubmitTurn(ctx, "s")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	got := make(chan func())
	go func() {
		next, err := r.takeSubmitTurn(context.Background(), "s")
		if err == nil {
			got <- next
		}
	}()
	select {
	case <-got:
		t.Fatal("a second submission took the turn while the first held it")
	case <-time.After(20 * time.Millisecond):
	}
	other, err := r.takeSubmitTurn(context.Background(), "other session")
	require.NoError(t, err, "another session's turn is its own")
	other()
	release()
	next := <-got
	next()
	require.Empty(t, r.submits)
}

// TestNotifyRunSkipsRunsDrivenHere: another process's notification wakes
// the watchers of a run (waits and streams), except of a run this process
// drives, whose own commits wake them; "" wakes everyone.
func TestNotifyRunSkipsRunsDrivenHere(t *testing.T) {
	t.Parallel()
	r := &Runtime{
		notify:  notifier{chans: map[string]*watchers{}},
		settled: notifier{chans: map[string]*watchers{}},
		driving: map[string]struct{}{"here": {}},
	}
	woken := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	tests := []struct {
		name   string
		notify string
		watch  string
		want   bool
	}{
		{"run of another process", "there", "there", true},
		{"run driven here", "here", "here", false},
		{"another run", "there", "here", false},
		{"everything", "", "here", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, doneEv := r.notify.watch(tt.watch)
			st, doneSt := r.settled.watch(tt.watch)
			defer doneEv()
			defer doneSt()
			r.NotifyRun(tt.notify)
			require.Equal(t, tt.want, woken(ev), "event watcher")
			require.Equal(t, tt.want, woken(st), "WaitRun watcher")
		})
	}
	// Once its driver ends (finish), the run is another process's to write.
	delete(r.driving, "here")
	st, doneSt := r.settled.watch("here")
	defer doneSt()
	r.NotifyRun("here")
	require.True(t, woken(st))
}
