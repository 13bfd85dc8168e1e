package runtime

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/hxtest"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
)

// pacedStreamer sends its first piece, waits until that piece's commit is
// in flight, then sends the rest while it still is.
type pacedStreamer struct {
	inFlight <-chan struct{}
	release  chan<- struct{}
}

func (p *pacedStreamer) Complete(ctx context.Context, req *model.Request) (*model.Response, error) {
	return p.CompleteStream(ctx, req, func(model.Delta) {})
}

func (p *pacedStreamer) CompleteStream(ctx context.Context, _ *model.Request, onDelta func(model.Delta)) (*model.Response, error) {
	onDelta(model.Delta{Kind: model.DeltaText, Text: "one "})
	select {
	case <-p.inFlight:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	onDelta(model.Delta{Kind: model.DeltaThinking, Text: "hmm "})
	onDelta(model.Delta{Kind: model.DeltaText, Text: "two "})
	onDelta(model.Delta{Kind: model.DeltaText, Text: "three "})
	onDelta(model.Delta{Kind: model.DeltaText, Text: "four"})
	close(p.release)
	return &model.Response{Text: "one two three four", StopReason: "end_turn"}, nil
}

// gatedStore holds the first delta-only commit until released, and notes
// every delta-only commit's events as (type, data).
type gatedStore struct {
	rtstore.Store
	inFlight chan<- struct{}
	release  <-chan struct{}
	once     sync.Once

	mu     sync.Mutex
	deltas [][][2]string
}

func (g *gatedStore) Commit(ctx context.Context, cm *rtstore.Commit) error {
	if cm.DeltaOnly {
		var evs [][2]string
		for _, pe := range cm.Events {
			var s string
			if err := json.Unmarshal(pe.Event.Data, &s); err != nil {
				return err
			}
			evs = append(evs, [2]string{pe.Event.Type, s})
		}
		g.mu.Lock()
		g.deltas = append(g.deltas, evs)
		g.mu.Unlock()
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.inFlight)
			<-g.release
		}
	}
	return g.Store.Commit(ctx, cm)
}

// TestStreamBatchesWhileCommitting: the first piece is committed while the
// provider is still answering (the provider waits for that commit), and
// the pieces that arrive while it is in flight go out together in the
// next delta-only commit, each piece an event of its own, in order.
func TestStreamBatchesWhileCommitting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "hxd.db"), Logger: hxtest.Logger(t), AutoMigrate: true})
	require.NoError(t, err)
	inFlight, release := make(chan struct{}), make(chan struct{})
	gs := &gatedStore{Store: st, inFlight: inFlight, release: release}
	def := &agent.Definition{
		Name: "paced", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{Text: "unused"}}},
	}
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(def))
	r, err := New(Config{
		Store: gs, Agents: reg, Logger: hxtest.Logger(t),
		SleepFunc: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		WatchPoll: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, r.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	b, err := r.bind(def.Ref())
	require.NoError(t, err)
	b.provider = &pacedStreamer{inFlight: inFlight, release: release}

	on := true
	sess, err := r.CreateSession(ctx, CreateSessionParams{Agent: def.Ref(), Recording: &on})
	require.NoError(t, err)
	run, _, err := r.SubmitRun(ctx, SubmitParams{SessionID: sess.ID, Message: json.RawMessage(`"count"`), Stream: true})
	require.NoError(t, err)
	res, err := r.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "one two three four", *res.Output)

	gs.mu.Lock()
	defer gs.mu.Unlock()
	require.Equal(t, [][][2]string{
		{{EventTextDelta, "one "}},
		{{EventThinkingDelta, "hmm "}, {EventTextDelta, "two "}, {EventTextDelta, "three "}, {EventTextDelta, "four"}},
	}, gs.deltas)
}
