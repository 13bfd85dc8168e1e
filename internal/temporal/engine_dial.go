package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"

	"hxd/internal/telemetry/propagate"
)

// TracerName is the instrumentation scope of the Temporal spans.
const TracerName = "hxd/internal/temporal"

// Client is the Temporal SDK client (an alias, so that cmd/hxd can hold
// one without importing the SDK).
type Client = client.Client

// DialOptions configure Dial.
type DialOptions struct {
	// Address is the frontend's host:port. Required.
	Address string
	// Namespace. Default: "default".
	Namespace string
	// Codec wraps every payload (the artifact codec that moves payloads
	// over 64 KiB to S3). Optional; workers and servers of one deployment
	// must use the same codec.
	Codec converter.PayloadCodec
	// Logger receives the SDK's logs (at warn and above). Default: none.
	Logger *slog.Logger
	// TracerProvider, when set, adds the SDK's OpenTelemetry interceptor
	// to the client and the workers made from it: starting a workflow,
	// the workflow and its activities are spans of the caller's trace
	// (carried in the Temporal headers as W3C trace context). Default: no
	// tracing.
	TracerProvider trace.TracerProvider
}

// Dial connects a Temporal client whose data converter is the SDK's
// default JSON converter wrapped by opts.Codec.
func Dial(ctx context.Context, opts DialOptions) (client.Client, error) {
	if opts.Address == "" {
		return nil, errors.New("temporal: address is required")
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	dc := converter.GetDefaultDataConverter()
	if opts.Codec != nil {
		dc = converter.NewCodecDataConverter(dc, opts.Codec)
	}
	co := client.Options{HostPort: opts.Address, Namespace: opts.Namespace, DataConverter: dc}
	if opts.Logger != nil {
		co.Logger = tlog.NewStructuredLogger(slog.New(warnHandler{opts.Logger.Handler()}))
	} else {
		co.Logger = tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	if opts.TracerProvider != nil {
		ti, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
			Tracer:            opts.TracerProvider.Tracer(TracerName),
			TextMapPropagator: propagate.Propagator(),
		})
		if err != nil {
			return nil, fmt.Errorf("temporal: tracing interceptor: %w", err)
		}
		co.Interceptors = append(co.Interceptors, ti)
	}
	c, err := client.DialContext(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("temporal: connect %s: %w", opts.Address, err)
	}
	return c, nil
}

// warnHandler drops records below warn (the SDK logs every poll at info).
type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(a)}
}
func (h warnHandler) WithGroup(n string) slog.Handler { return warnHandler{h.Handler.WithGroup(n)} }
