package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/model"
)

// TestTracingOffAllocatesNothing: without a TracerProvider (a nil
// *Tracing) every span hook of a run is a nil check: no span, no
// attribute, no allocation.
func TestTracingOffAllocatesNothing(t *testing.T) {
	var tr *Tracing
	require.Nil(t, NewTracing(nil, true))
	ctx := context.Background()
	st := &RunState{SessionID: "ses", RunID: "run", Status: StatusFailed, Error: &RunError{Type: "X", Message: "y"}}
	e := &ToolEntry{ExecutionKey: "run:1:c", Attempt: 1}
	req := &model.Request{}
	resp := &model.Response{Text: "hi"}
	kinds := []journal.Kind{journal.KindModelStarted}
	allocs := testing.AllocsPerRun(100, func() {
		span := tr.startAgent(ctx, st, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true)
		_ = withSpan(ctx, span)
		_ = traceContextOf(span)
		cctx, chat := tr.StartChat(ctx, ChatAttempt{SessionID: "ses", RunID: "run", Model: "m", Attempt: 1, Request: req})
		tr.EndChat(chat, "m", resp, nil)
		_, tool := tr.StartTool(cctx, "ses", "run", e)
		tr.EndTool(tool, ToolOutcomeReturned, nil, nil)
		_, commit := tr.startCommit(ctx, st, kinds)
		endSpan(commit, nil)
		_, export := tr.startExport(ctx, "run")
		endSpan(export, nil)
		endAgent(span, st)
	})
	require.Zero(t, allocs)
}
