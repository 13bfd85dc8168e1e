package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"hxd/internal/telemetry"
)

// otelFlushTimeout bounds the export of the spans still queued when serve
// or worker stops (after everything else stopped).
const otelFlushTimeout = 5 * time.Second

// registerOTel adds --otel and --otel-capture-content (serve and worker)
// and binds them to HXD_OTEL and HXD_OTEL_CAPTURE_CONTENT.
func registerOTel(fs *flag.FlagSet, ef *envFlags, on, captureContent *bool) {
	fs.BoolVar(on, "otel", false, "export OpenTelemetry traces over OTLP, configured by the standard OTEL_* variables "+
		"(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf or grpc, OTEL_SERVICE_NAME, "+
		"OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES); OTEL_SDK_DISABLED=true turns it off (HXD_OTEL)")
	ef.bind("otel", "HXD_OTEL")
	fs.BoolVar(captureContent, "otel-capture-content", false, "with --otel, put prompts, completions and tool payloads "+
		"(auto-redacted as in exports) into spans; off, spans hold no payload (HXD_OTEL_CAPTURE_CONTENT)")
	ef.bind("otel-capture-content", "HXD_OTEL_CAPTURE_CONTENT")
}

// setupOTel starts tracing when on (telemetry.Setup; an unsupported OTLP
// protocol is a usage error, exit 2) and returns it with the logger to use:
// with tracing on, log lines of a traced context carry trace_id and
// span_id. stop flushes the spans still queued, within otelFlushTimeout.
func setupOTel(ctx context.Context, on bool, log *slog.Logger) (tel *telemetry.Telemetry, _ *slog.Logger, stop func(), err error) {
	tel, err = telemetry.Setup(ctx, telemetry.Options{Enabled: on, Version: version, Logger: log})
	if err != nil {
		return nil, nil, nil, &exitError{code: 2, err: err}
	}
	if !tel.Enabled() {
		return tel, log, func() {}, nil
	}
	log = slog.New(telemetry.LogHandler(log.Handler()))
	log.InfoContext(ctx, "OpenTelemetry tracing on")
	stop = func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otelFlushTimeout)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("flush OpenTelemetry spans", "error", err)
		}
	}
	return tel, log, stop, nil
}
