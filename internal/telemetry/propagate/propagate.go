package propagate

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagator is the W3C TraceContext and Baggage propagator that
// telemetry.Setup installs as the global one when tracing is on.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Inject writes the trace context of ctx (W3C traceparent and tracestate,
// baggage) into h with the global propagator, which Setup installs when
// tracing is on. Without a valid span in ctx it writes nothing and costs
// a context lookup.
func Inject(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectTransport wraps base (nil: http.DefaultTransport) so that every
// request carries the trace context of its context (see Inject). A
// request whose context holds no valid span goes out as it is; one that
// does is cloned first, as a RoundTripper must not change its request.
func InjectTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(*injectTransport); ok {
		return base
	}
	return &injectTransport{base: base}
}

type injectTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *injectTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if trace.SpanContextFromContext(ctx).IsValid() {
		req = req.Clone(ctx)
		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the wrapped
// transport, when it has any.
func (t *injectTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
