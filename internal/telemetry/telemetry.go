package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"hxd/internal/telemetry/propagate"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES do not set it.
const DefaultServiceName = "hxd"

// The OTLP protocols OTEL_EXPORTER_OTLP_PROTOCOL (or its _TRACES_
// variant) may name.
const (
	ProtocolHTTP = "http/protobuf" // the default
	ProtocolGRPC = "grpc"
)

// ErrProtocol is an OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL other than
// http/protobuf or grpc.
var ErrProtocol = errors.New("unsupported OTLP protocol")

// Options configure Setup. Everything about the exporter, the sampler and
// the resource comes from the standard environment variables.
type Options struct {
	// Enabled turns tracing on (--otel). Off, or with
	// OTEL_SDK_DISABLED=true, Setup returns a no-op Telemetry.
	Enabled bool
	// Version is the resource's service.version. Optional.
	Version string
	// Logger receives the SDK's errors (a failed export, say). Optional,
	// default: they are discarded.
	Logger *slog.Logger
}

// Telemetry is the process's tracing: a tracer provider.
type Telemetry struct {
	sdk *sdktrace.TracerProvider // nil when off
	tp  trace.TracerProvider
}

// Propagator is the W3C TraceContext and Baggage propagator Setup installs
// (propagate.Propagator).
func Propagator() propagation.TextMapPropagator { return propagate.Propagator() }

// Setup builds the tracing of the process. On, it builds an SDK tracer
// provider exporting in batches over OTLP (OTEL_EXPORTER_OTLP_PROTOCOL
// http/protobuf, the default, or grpc; endpoints, headers and timeouts
// from the OTEL_EXPORTER_OTLP_* variables the exporters read), sampled
// by OTEL_TRACES_SAMPLER(_ARG), with the resource of OTEL_SERVICE_NAME
// (default "hxd") and OTEL_RESOURCE_ATTRIBUTES, and installs the W3C
// propagator as the global one (what InjectTransport and Inject use).
// An unsupported protocol is an error wrapping ErrProtocol.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if !opts.Enabled || sdkDisabled() {
		return Disabled(), nil
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if opts.Version != "" {
		attrs = append(attrs, attribute.String("service.version", opts.Version))
	}
	// Later options win: the environment's service name and attributes
	// over the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	// A partial resource (a malformed OTEL_RESOURCE_ATTRIBUTES entry) is
	// used as it is, as other SDKs do; the error is reported.
	if err != nil && opts.Logger != nil {
		opts.Logger.WarnContext(ctx, "OTEL_RESOURCE_ATTRIBUTES: some attributes were ignored", "error", err)
	}
	if opts.Logger != nil {
		log := opts.Logger.With("component", "otel")
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "error", err) }))
	}
	// The sampler is the SDK's default, which reads OTEL_TRACES_SAMPLER
	// and OTEL_TRACES_SAMPLER_ARG.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTextMapPropagator(Propagator())
	return &Telemetry{sdk: tp, tp: tp}, nil
}

// Disabled is tracing off: a no-op provider.
func Disabled() *Telemetry {
	return &Telemetry{tp: noop.NewTracerProvider()}
}

// sdkDisabled reports OTEL_SDK_DISABLED=true (case-insensitive, as the
// specification says; any other value leaves the SDK enabled).
func sdkDisabled() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")
}

// protocol is the OTLP protocol of traces: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
// else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
func protocol() string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return v
		}
	}
	return ProtocolHTTP
}

// newExporter is the OTLP exporter of protocol(); the exporters read their
// endpoint, headers, timeout, compression and TLS settings from the
// environment themselves.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	switch p := protocol(); p {
	case ProtocolHTTP:
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP/HTTP trace exporter: %w", err)
		}
		return exp, nil
	case ProtocolGRPC:
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP/gRPC trace exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: %w (use %s or %s)", p, ErrProtocol, ProtocolHTTP, ProtocolGRPC)
	}
}

// Enabled reports whether spans are recorded and exported; callers wrap
// handlers, transports and clients only then.
func (t *Telemetry) Enabled() bool { return t.sdk != nil }

// TracerProvider is the provider spans are made with; a no-op one when off.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// Shutdown exports the spans still queued and stops the exporter, within
// ctx. Off, it does nothing.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry shutdown: %w", err)
	}
	return nil
}
