package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/minio/minio-go/v7"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/temporal"
	"hxd/internal/temporal/artifacts"
	"hxd/internal/temporal/events"
)

// Engines of `hxd serve --engine`.
const (
	engineLocal    = "local"    // SQLite (--db) or PostgreSQL (--database-url)
	engineTemporal = "temporal" // Temporal workflows, Redis events, S3 artifacts
)

// temporalConfig is what `hxd serve --engine temporal` and `hxd worker`
// read to reach Temporal, Redis and S3.
type temporalConfig struct {
	// Address of the Temporal frontend (host:port). Required.
	Address string
	// Namespace. Default: default.
	Namespace string
	// TaskQueue of the session workflows. Default: harness-x-v1.
	TaskQueue string
	// RedisAddr carries the provisional public events ("host:port" or a
	// redis:// URL). Optional for serve and worker: without it events
	// are not published and the event endpoints answer a gap event.
	RedisAddr string
	// S3 holds artifacts (payloads over 64 KiB) and the run index.
	// Required; the keys come from the environment only.
	S3 s3Config

	// tracerProvider is the one of --otel (nil when off): the Temporal
	// client's interceptor and the Redis client trace with it.
	tracerProvider trace.TracerProvider
}

// s3Config locates the S3-compatible bucket of artifacts and the run index.
type s3Config struct {
	// Endpoint is host:port (HTTPS) or an http(s):// URL.
	Endpoint string
	// Bucket must exist.
	Bucket string
	// Prefix precedes every object key. Default: harness-x/.
	Prefix string
	// Region. Default: discovered.
	Region string
	// AccessKey and SecretKey: HXD_S3_ACCESS_KEY / HXD_S3_SECRET_KEY, else
	// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
	AccessKey, SecretKey string
}

// register adds the flags to fs and binds them to their environment
// variables in ef (a Redis URL may hold a password: never a flag default).
func (c *temporalConfig) register(fs *flag.FlagSet, ef *envFlags) {
	fs.StringVar(&c.Address, "temporal-address", "", "Temporal frontend host:port (HXD_TEMPORAL_ADDRESS)")
	ef.bind("temporal-address", "HXD_TEMPORAL_ADDRESS")
	fs.StringVar(&c.Namespace, "namespace", "default", "Temporal namespace (HXD_TEMPORAL_NAMESPACE)")
	ef.bind("namespace", "HXD_TEMPORAL_NAMESPACE")
	fs.StringVar(&c.TaskQueue, "task-queue", temporal.DefaultTaskQueue, "Temporal task queue (HXD_TASK_QUEUE)")
	ef.bind("task-queue", "HXD_TASK_QUEUE")
	fs.StringVar(&c.RedisAddr, "redis-addr", "", "Redis host:port or redis:// URL for run events (HXD_REDIS_ADDR)")
	ef.bind("redis-addr", "HXD_REDIS_ADDR")
	fs.StringVar(&c.S3.Endpoint, "s3-endpoint", "", "S3 endpoint: host:port (HTTPS) or http(s):// URL (HXD_S3_ENDPOINT)")
	ef.bind("s3-endpoint", "HXD_S3_ENDPOINT")
	fs.StringVar(&c.S3.Bucket, "s3-bucket", "", "S3 bucket for artifacts and the run index (HXD_S3_BUCKET)")
	ef.bind("s3-bucket", "HXD_S3_BUCKET")
	fs.StringVar(&c.S3.Prefix, "s3-prefix", artifacts.DefaultPrefix, "S3 object key prefix (HXD_S3_PREFIX)")
	ef.bind("s3-prefix", "HXD_S3_PREFIX")
	fs.StringVar(&c.S3.Region, "s3-region", "", "S3 region, empty = discovered (HXD_S3_REGION)")
	ef.bind("s3-region", "HXD_S3_REGION")
	// Credentials only from the environment, never from the command line
	// (where ps shows them).
	envOr := func(name, def string) string {
		if v := ef.getenv(name); v != "" {
			return v
		}
		return def
	}
	c.S3.AccessKey = envOr("HXD_S3_ACCESS_KEY", envOr("AWS_ACCESS_KEY_ID", ""))
	c.S3.SecretKey = envOr("HXD_S3_SECRET_KEY", envOr("AWS_SECRET_ACCESS_KEY", ""))
}

func (c *temporalConfig) validate() []error {
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("--temporal-address is required"))
	}
	if c.TaskQueue == "" {
		errs = append(errs, errors.New("--task-queue must not be empty"))
	}
	if c.S3.Endpoint == "" || c.S3.Bucket == "" {
		errs = append(errs, errors.New("--s3-endpoint and --s3-bucket are required (artifacts and the run index live in S3)"))
	} else if err := validateS3Endpoint(c.S3.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if c.S3.AccessKey == "" || c.S3.SecretKey == "" {
		errs = append(errs, errors.New("S3 credentials are required: set HXD_S3_ACCESS_KEY and HXD_S3_SECRET_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"))
	}
	return errs
}

// validateS3Endpoint checks --s3-endpoint before anything echoes it: a
// password written into it never reaches a message, and credentials come
// from the environment only.
func validateS3Endpoint(ep string) error {
	if _, _, err := artifacts.ParseEndpoint(ep); err != nil {
		return fmt.Errorf("--s3-endpoint: %w (credentials come from HXD_S3_ACCESS_KEY and HXD_S3_SECRET_KEY)", err)
	}
	return nil
}

// temporalDeps are the connections both serve and worker use.
type temporalDeps struct {
	client temporal.Client
	events *events.Redis // nil without --redis-addr
	// s3 is the bucket's client; store the artifact store on it.
	s3    *minio.Client
	store *artifacts.Store
	close func()
}

// dialTemporal connects to Temporal with the artifact codec and opens the
// Redis event stream.
func dialTemporal(ctx context.Context, c *temporalConfig, log *slog.Logger) (*temporalDeps, error) {
	s3, err := artifacts.NewClient(artifacts.ClientConfig{
		Endpoint: c.S3.Endpoint, AccessKey: c.S3.AccessKey, SecretKey: c.S3.SecretKey, Region: c.S3.Region,
	})
	if err != nil {
		return nil, err
	}
	store, err := artifacts.NewStore(s3, artifacts.Config{Bucket: c.S3.Bucket, Prefix: c.S3.Prefix})
	if err != nil {
		return nil, err
	}
	codec, err := artifacts.NewCodec(store, artifacts.CodecConfig{})
	if err != nil {
		return nil, err
	}
	cl, err := temporal.Dial(ctx, temporal.DialOptions{
		Address: c.Address, Namespace: c.Namespace, Codec: codec, Logger: log,
		TracerProvider: c.tracerProvider,
	})
	if err != nil {
		return nil, err
	}
	d := &temporalDeps{client: cl, s3: s3, store: store}
	if c.RedisAddr != "" {
		events.SetLogger(log)
		ev, err := events.Open(c.RedisAddr, events.Config{TracerProvider: c.tracerProvider})
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		if err := ev.Ping(ctx); err != nil {
			log.WarnContext(ctx, "redis unreachable; events stay unavailable until it answers", "addr", events.DisplayAddr(c.RedisAddr), "error", err)
		}
		d.events = ev
	}
	d.close = func() {
		if d.events != nil {
			_ = d.events.Close()
		}
		cl.Close()
	}
	return d, nil
}
