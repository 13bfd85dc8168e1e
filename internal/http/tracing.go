package http

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"hxd/internal/telemetry/propagate"
)

// tracerName is the instrumentation scope of the spans this package makes.
const tracerName = "hxd/internal/http"

// traced wraps the API router in otelhttp's server span, which continues
// the trace of an incoming traceparent (prop, default W3C TraceContext
// and Baggage). The span is named after the method until nameSpan renames
// it after routing.
func traced(h http.Handler, tp trace.TracerProvider, prop propagation.TextMapPropagator) http.Handler {
	if prop == nil {
		prop = propagate.Propagator()
	}
	return otelhttp.NewHandler(h, "",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
		// No metrics: /metrics has the HTTP ones already.
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		// Scrapes and probes would each start a trace of their own.
		otelhttp.WithFilter(func(r *http.Request) bool { return !untracedPaths[r.URL.Path] }),
	)
}

// untracedPaths are served without a span: the metrics scrape and the
// health probes, which run every few seconds and trace nothing of a run.
var untracedPaths = map[string]bool{"/metrics": true, "/healthz": true, "/readyz": true}

// nameSpan renames the request's server span after routing to
// "METHOD route-template" (OpenTelemetry's HTTP conventions) and sets
// http.route; a request no route matched keeps the method alone, so that
// unknown paths do not make new span names.
func nameSpan(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		rc := chi.RouteContext(r.Context())
		if rc == nil {
			return
		}
		if route := rc.RoutePattern(); route != "" {
			span := trace.SpanFromContext(r.Context())
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
	})
}

// noopTracer makes the spans of a Server without a tracer provider.
var noopTracer = noop.NewTracerProvider().Tracer(tracerName)

// spanTracer is the tracer of the Server's own spans; a no-op one when
// tracing is off.
func (s *Server) spanTracer() trace.Tracer {
	if s.tracer == nil {
		return noopTracer
	}
	return s.tracer
}

// traceID is the trace id of the request's span, when it is valid and
// sampled (a trace that exists in the backend); "" otherwise.
func traceID(r *http.Request) string {
	sc := trace.SpanContextFromContext(r.Context())
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}
