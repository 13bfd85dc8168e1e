package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTracerProvider: with Config.TracerProvider, the queries made under
// a caller's span are its children (otelpgx), and the queries made
// outside a trace make no span.
func TestTracerProvider(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := testConfig(t)
	cfg.TracerProvider = tp
	st := openStore(t, cfg)
	ctx := testCtx(t)

	require.NoError(t, st.Ping(ctx))
	require.Empty(t, rec.Ended(), "queries outside a trace")

	sctx, parent := tp.Tracer("test").Start(ctx, "request")
	require.NoError(t, st.Ping(sctx))
	parent.End()
	var children int
	for _, s := range rec.Ended() {
		if s.Name() == "request" {
			continue
		}
		require.Equal(t, parent.SpanContext().SpanID(), s.Parent().SpanID(), "span %q", s.Name())
		require.Equal(t, parent.SpanContext().TraceID(), s.SpanContext().TraceID())
		children++
	}
	require.Positive(t, children, "no query span under the request")
}
