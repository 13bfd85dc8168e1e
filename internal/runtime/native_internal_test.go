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
	"hxd/internal/hxbundle"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/store/sqlite"
	"hxd/internal/tool"
)

// replayProvider answers call i with replies[i] and keeps the JSON of
// every request's messages.
type replayProvider struct {
	mu      sync.Mutex
	replies []model.Response
	sent    []json.RawMessage
}

func (p *replayProvider) Complete(_ context.Context, req *model.Request) (*model.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs, err := json.Marshal(req.Messages)
	if err != nil {
		return nil, err
	}
	p.sent = append(p.sent, msgs)
	i := len(p.sent) - 1
	if i >= len(p.replies) {
		return nil, &model.Failure{Type: model.FailureScriptExhausted, Message: "no more replies"}
	}
	resp := p.replies[i]
	return &resp, nil
}

func (p *replayProvider) requests() []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]json.RawMessage(nil), p.sent...)
}

func contentBlocks(t *testing.T, s string) []model.ContentBlock {
	t.Helper()
	var out []model.ContentBlock
	require.NoError(t, json.Unmarshal([]byte(s), &out))
	return out
}

// TestThinkingBlocksRoundTrip: a provider answers with signed thinking, a
// redacted_thinking block, an opaque block, text and a tool call; the next
// model request carries that assistant turn's blocks verbatim and in
// order, model.response and model.processed keep them as `content`,
// model.completed keeps the reference's five keys, the final turn keeps
// its native blocks in the conversation, and the run's usage is the sum
// of both calls'.
func TestThinkingBlocksRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := `[{"type":"thinking","thinking":"Look the invoice up.","signature":"EqQBCkYIARgCIkB+sig=="},` +
		`{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFjT"},` +
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"acme"},"cache_control":null},` +
		`{"type":"text","text":"Checking."},` +
		`{"type":"tool_use","id":"toolu_1","name":"count","input":{"n":1}}]`
	final := `[{"type":"thinking","thinking":"It answered.","signature":"sig-2"},{"type":"text","text":"done"}]`
	fake := &replayProvider{replies: []model.Response{
		{
			Text: "Checking.", Thinking: "Look the invoice up.", StopReason: "tool_use",
			ToolCalls:     []model.ToolCall{{ID: "toolu_1", Name: "count", Input: json.RawMessage(`{"n":1}`)}},
			Usage:         model.Usage{InputTokens: 100, OutputTokens: 40, CacheReadInputTokens: 7, CacheCreationInputTokens: 3},
			UsageReported: true,
			Content:       contentBlocks(t, first),
		},
		{
			Text: "done", Thinking: "It answered.", StopReason: "end_turn", ToolCalls: []model.ToolCall{},
			Usage:         model.Usage{InputTokens: 150, OutputTokens: 10, CacheReadInputTokens: 5},
			UsageReported: true,
			Content:       contentBlocks(t, final),
		},
	}}

	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "hxd.db"), Logger: hxtest.Logger(t), AutoMigrate: true})
	require.NoError(t, err)
	def := &agent.Definition{
		Name: "thinker", Version: "v1",
		Model: model.Config{Provider: "scripted", Script: []model.ScriptStep{{Text: "unused"}}},
		Tools: []agent.ToolDef{{Config: tool.Config{Name: "count", Kind: "builtin", Builtin: "count", ReplayPolicy: "safe"}}},
	}
	reg := agent.NewRegistry("count")
	require.NoError(t, reg.Register(def))
	r, err := New(Config{
		Store: st, Agents: reg, Logger: hxtest.Logger(t),
		ToolOptions: tool.Options{WorkDir: t.TempDir(), Builtins: map[string]tool.BuiltinFunc{
			"count": func(context.Context, tool.Invocation) (tool.Outcome, error) {
				return tool.Outcome{Result: model.ToolResult{Content: json.RawMessage(`"1 invoice"`)}}, nil
			},
		}},
		SleepFunc: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		WatchPoll: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, r.Stop(context.Background()))
		require.NoError(t, st.Close())
	})
	// The agent's model is the fake provider.
	b, err := r.bind(agent.Ref{Name: "thinker", Version: "v1"})
	require.NoError(t, err)
	b.provider = fake

	on := true
	sess, err := r.CreateSession(ctx, CreateSessionParams{Agent: agent.Ref{Name: "thinker", Version: "v1"}, Recording: &on})
	require.NoError(t, err)
	run, _, err := r.SubmitRun(ctx, SubmitParams{SessionID: sess.ID, Message: json.RawMessage(`"How much does ACME owe?"`)})
	require.NoError(t, err)
	res, err := r.WaitRun(ctx, run.RunID, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "done", *res.Output)

	// The second request sends the first answer's blocks back verbatim.
	reqs := fake.requests()
	require.Len(t, reqs, 2)
	var second []struct {
		Role    model.Role      `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(reqs[1], &second))
	require.Len(t, second, 3, "user, assistant, tool results: %s", reqs[1])
	require.Equal(t, model.RoleAssistant, second[1].Role)
	require.Equal(t, first, string(second[1].Content))
	require.Contains(t, string(second[2].Content), `"tool_use_id":"toolu_1"`)

	// The journal: content in model.response and model.processed, never
	// in model.completed.
	recs, err := st.JournalList(ctx, run.RunID, 0, 1000)
	require.NoError(t, err)
	wantContent := []string{first, final}
	for _, kind := range []journal.Kind{journal.KindModelResponse, journal.KindModelProcessed, journal.KindModelCompleted} {
		n := 0
		for _, rec := range recs {
			if rec.Kind != kind {
				continue
			}
			var payload map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(rec.Payload, &payload))
			if kind == journal.KindModelCompleted {
				require.NotContains(t, payload, "content", "model.completed keeps the reference's keys")
				require.Len(t, payload, 5, "%s", rec.Payload)
			} else {
				require.JSONEq(t, wantContent[n], string(payload["content"]), "%s of step %s", kind, rec.StepID)
			}
			n++
		}
		require.Equal(t, 2, n, "one %s per call", kind)
	}

	// The final turn keeps its native blocks in the conversation.
	row, err := st.RunGet(ctx, run.RunID)
	require.NoError(t, err)
	state, err := decodeState(row.State)
	require.NoError(t, err)
	last := state.Messages[len(state.Messages)-1]
	require.Equal(t, model.RoleAssistant, last.Role)
	got, err := json.Marshal(last.Content)
	require.NoError(t, err)
	require.Equal(t, final, string(got))

	// The run exports as a valid, complete bundle whose model.response
	// records keep the blocks.
	require.NoError(t, r.Export(ctx, run.RunID, func(inc *Incident) error {
		a, err := hxbundle.Build(ctx, hxbundle.RunInfo{RunID: inc.RunID, SessionID: inc.SessionID, Status: string(inc.Status), Phase: string(inc.Phase)},
			inc, hxbundle.Policy{IncludePayloads: true}, t.TempDir())
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close()) }()
		rep := hxbundle.Verify(a.ReaderAt(), a.Size(), hxbundle.DefaultLimits)
		require.True(t, rep.Valid, "%+v", rep)
		require.True(t, rep.Complete, "%+v", rep)
		return nil
	}))

	// Usage: both calls added up, every call reported.
	require.Equal(t, model.Usage{InputTokens: 250, OutputTokens: 50, CacheReadInputTokens: 12, CacheCreationInputTokens: 3}, res.Usage)
	require.False(t, res.UsageIncomplete)
}
