// Package telemetry sets up OpenTelemetry tracing for hxd (issue 24): the
// tracer provider and its OTLP exporter, configured only through the
// standard OTEL_* environment variables, the W3C propagators, a slog
// handler that adds the trace and span ids of a log call's context, and
// an http.RoundTripper that propagates the trace of a request's context.
//
// It must import only the OpenTelemetry libraries and the standard
// library, nothing of this module, so that every layer (model, tool and
// mcp below the runtime included) may use it.
//
//	tel, err := telemetry.Setup(ctx, telemetry.Options{Enabled: otelFlag, Version: version, Logger: log})
//	if err != nil { ... } // an unknown OTEL_EXPORTER_OTLP_PROTOCOL
//	defer tel.Shutdown(shutdownCtx) // flushes the spans still queued
//	hxhttp.Config{TracerProvider: tel.TracerProvider(), ...}
//
// With tracing off (Enabled false, or OTEL_SDK_DISABLED=true), the
// provider is a no-op one and Enabled reports false: callers then wrap
// nothing, so tracing costs nothing.
package telemetry
