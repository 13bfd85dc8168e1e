package hxtest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"hxd/internal/telemetry/propagate"
)

// TraceParent is the W3C traceparent of the span TracedContext puts in a
// context.
const TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TracedContext installs, for t, the global propagator that tracing
// installs when it is on (restored at cleanup, so a test calling it must
// not run in parallel), and returns ctx carrying a sampled span whose
// traceparent is TraceParent.
func TracedContext(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagate.Propagator())
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": TraceParent})
}
