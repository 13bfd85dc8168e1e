package postgres

import (
	"context"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"
)

// newQueryTracer is the pgx tracer of Config.TracerProvider (nil: none):
// otelpgx's spans, for queries and batches made under a span of the
// caller only, so that the pool's background work (the group committer
// between requests, health checks) starts no trace of its own. Query
// arguments are never recorded (otelpgx's default).
func newQueryTracer(tp trace.TracerProvider) pgx.QueryTracer {
	if tp == nil {
		return nil
	}
	return &parentTracer{otel: otelpgx.NewTracer(otelpgx.WithTracerProvider(tp))}
}

// parentTracer passes to otelpgx the queries and batches whose context
// holds a valid span, and marks the context it did so in: an end whose
// start was skipped must not end the caller's span.
type parentTracer struct {
	otel *otelpgx.Tracer
}

// tracedKey marks a context whose query or batch otelpgx traces.
type tracedKey struct{}

func traced(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid()
}

func (t *parentTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return context.WithValue(t.otel.TraceQueryStart(ctx, conn, data), tracedKey{}, true)
}

func (t *parentTracer) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if ctx.Value(tracedKey{}) != nil {
		t.otel.TraceQueryEnd(ctx, conn, data)
	}
}

func (t *parentTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !traced(ctx) {
		return ctx
	}
	return context.WithValue(t.otel.TraceBatchStart(ctx, conn, data), tracedKey{}, true)
}

func (t *parentTracer) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	if ctx.Value(tracedKey{}) != nil {
		t.otel.TraceBatchQuery(ctx, conn, data)
	}
}

func (t *parentTracer) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	if ctx.Value(tracedKey{}) != nil {
		t.otel.TraceBatchEnd(ctx, conn, data)
	}
}

var (
	_ pgx.QueryTracer = (*parentTracer)(nil)
	_ pgx.BatchTracer = (*parentTracer)(nil)
)
