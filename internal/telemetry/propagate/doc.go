// Package propagate carries the trace context of a request's context out
// on HTTP requests (W3C traceparent, tracestate and baggage). It uses the
// OpenTelemetry API only, never its SDK, so that model, tool and mcp, which
// sit below the runtime, can use it; internal/telemetry sets the SDK up.
package propagate
