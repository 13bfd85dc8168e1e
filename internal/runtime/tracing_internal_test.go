package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"hxd/internal/journal"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
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

// TestEndSpanErrorType: a failed commit's or export's span names the
// error by its type, never by its text.
func TestEndSpanErrorType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("commit: %w", rtstore.ErrUnavailable), "unavailable"},
		{fmt.Errorf("commit: %w", rtstore.ErrLeaseLost), "lease_lost"},
		{fmt.Errorf("export: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("%w: %w", ErrRecording, rtstore.ErrRecordConflict), "record_conflict"},
		{errors.New(`insert {"card":"4111 1111 1111 1111"}`), "_OTHER"},
	} {
		rec := tracetest.NewSpanRecorder()
		_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "hxd.commit")
		endSpan(span, tc.err)
		ended := rec.Ended()
		require.Len(t, ended, 1)
		require.Equal(t, codes.Error, ended[0].Status().Code)
		require.Equal(t, tc.want, ended[0].Status().Description, "%v", tc.err)
		require.Contains(t, ended[0].Attributes(), attribute.String("error.type", tc.want))
	}
}
