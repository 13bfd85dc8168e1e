package http

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	contract "hxd/api"
	"hxd/internal/http/api"
	"hxd/internal/hxbundle"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes bounds request bodies when Config.MaxBodyBytes is 0.
	DefaultMaxBodyBytes int64 = 1 << 20
	// DefaultKeepAlive is the SSE keep-alive interval when Config.KeepAlive is 0.
	DefaultKeepAlive = 15 * time.Second
	// DefaultBodyTimeout and DefaultUploadTimeout bound how long a request
	// body may take to arrive when Config.BodyTimeout / UploadTimeout are 0.
	DefaultBodyTimeout   = 30 * time.Second
	DefaultUploadTimeout = 10 * time.Minute
)

// Registry is where the HTTP metrics are registered and what /metrics
// serves; *prometheus.Registry satisfies it.
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Config configures New.
type Config struct {
	// Service is the runtime the handlers call. Required.
	Service Service
	// Logger receives access logs and server-side errors (component=http is
	// added). Optional, default: logs are discarded.
	Logger *slog.Logger
	// Version is reported by /healthz and /readyz. Optional, default: "dev".
	Version string
	// MaxBodyBytes bounds every request body (larger → 413
	// payload_too_large). Optional, default: 1 MiB.
	MaxBodyBytes int64
	// Registry receives the HTTP metrics and is served at /metrics.
	// Optional, default: a new registry holding only the HTTP metrics.
	Registry Registry
	// KeepAlive is the interval of `: keep-alive` comments on event
	// streams. Optional, default: 15s.
	KeepAlive time.Duration
	// BodyTimeout bounds how long a request body may take to arrive,
	// from the start of its handling; UploadTimeout does for bundle
	// uploads. A body still incomplete then is a 408 request_timeout and
	// the connection closes. Once the body is read, the request may take
	// as long as it needs (a run submitted with ?wait). Optional,
	// defaults: 30s and 10m.
	BodyTimeout, UploadTimeout time.Duration
	// BundleLimits bound the bundles the server handles: uploads to
	// /bundles/verify and /bundles/playback (whose bodies MaxBodyBytes does
	// not bound: a larger upload is reported invalid), and exports, whose
	// request may only tighten them. Optional; a zero field takes its
	// hxbundle.DefaultLimits value (64 MiB, 32 MiB per member, 100,000
	// records, 10,000 members).
	BundleLimits hxbundle.Limits
	// SpoolDir holds the private temporary files (mode 0600) of exports
	// and uploaded bundles while a request uses them. Optional, default:
	// os.TempDir().
	SpoolDir string
	// MaxBundleJobs bounds the uploaded bundles verified or played back at
	// once; more wait, in arrival order as the Go runtime wakes them, for a
	// free slot (or until their client goes away). Verifying a bundle
	// takes CPU on every core and memory in proportion to its largest
	// member, so a few at a time is as fast and bounds the memory that
	// crafted uploads can claim together. Optional, default: 2.
	MaxBundleJobs int
	// Authenticator verifies the bearer token of every request except the
	// operations the contract declares public (`security: []`): a missing
	// or rejected token is a 401 `unauthorized`. Optional, default: no
	// authentication; every request acts as runtime.LocalPrincipal, which
	// holds every role (--auth=none).
	Authenticator Authenticator
	// Console serves the web console's static files at /ui and /ui/...,
	// without authentication (the console's own API calls carry the
	// caller's token). Optional, default: nil, no console (/ui is a 404
	// not_found problem like any unknown path).
	Console http.Handler
	// BundleSigner signs every export (hxd.signature). Optional, default:
	// exports are unsigned.
	BundleSigner *hxbundle.Signer
	// BundleKeys are the public keys GET /.well-known/hxd-bundle-keys
	// publishes and /bundles/verify and /bundles/playback trust: the
	// signer's and older ones kept after a rotation. Optional, default:
	// the signer's key only. The signer's key is added when missing.
	BundleKeys *hxbundle.KeySet
	// TracerProvider, when set, traces every API request (not the
	// console's files): a server span per request, named after the route
	// template once routed ("GET /sessions/{session_id}", with
	// http.route), continuing the trace of an incoming W3C traceparent;
	// an hxd.verify span around bundle verification; and a trace_id
	// member in problem responses of sampled requests. Optional, default:
	// no tracing, and nothing of it is on the request path.
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context from request headers.
	// Optional, default: W3C TraceContext and Baggage.
	Propagator propagation.TextMapPropagator
}

// Server implements the generated strict-server interface on top of a
// Service. It is created by New and is safe for concurrent use.
type Server struct {
	svc       Service
	log       *slog.Logger
	version   string
	keepAlive time.Duration
	// contractETag is the strong ETag of api/openapi.yaml as served.
	contractETag string
	metrics      http.Handler // promhttp for the Registry
	limits       hxbundle.Limits
	spoolDir     string
	auth         Authenticator // nil: --auth=none
	// bundleJobs holds a token per upload being verified or played back.
	bundleJobs   chan struct{}
	bundleSigner *hxbundle.Signer // nil: exports are unsigned
	bundleKeys   *hxbundle.KeySet // trusted and published keys
	tracer       trace.Tracer     // nil without Config.TracerProvider
}

// DefaultMaxBundleJobs is Config.MaxBundleJobs' default.
const DefaultMaxBundleJobs = 2

var _ api.StrictServerInterface = (*Server)(nil)

// New returns the HTTP handler of the whole API (every operation of
// api/openapi.yaml, /openapi.yaml and /metrics included) behind the
// middleware chain (request id, access log and metrics, panic recovery,
// body limit, authentication), per-operation role checks and request
// validation against the embedded contract.
//
// New panics on wiring bugs, as prometheus.MustRegister does: a nil
// cfg.Service, negative cfg.BundleLimits, metrics already registered in cfg.Registry (New called
// twice with one registry) or an embedded contract that does not load.
func New(cfg Config) http.Handler {
	h, err := newHandler(cfg)
	if err != nil {
		panic(err)
	}
	return h
}

func newHandler(cfg Config) (http.Handler, error) {
	if cfg.Service == nil {
		return nil, errors.New("http: Config.Service is required")
	}
	s := &Server{svc: cfg.Service, log: cfg.Logger, version: cfg.Version, keepAlive: cfg.KeepAlive,
		limits: hxbundle.Policy{Limits: cfg.BundleLimits}.EffectiveLimits(), spoolDir: cfg.SpoolDir,
		auth: cfg.Authenticator, bundleSigner: cfg.BundleSigner}
	s.bundleKeys = hxbundle.NewKeySet()
	if cfg.BundleSigner != nil {
		s.bundleKeys.Add(cfg.BundleSigner.PublicKey())
	}
	for _, k := range cfg.BundleKeys.Keys() {
		s.bundleKeys.Add(k)
	}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	if err := s.limits.Validate(); err != nil {
		return nil, fmt.Errorf("http: Config.BundleLimits: %w", err)
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.log = s.log.With("component", "http")
	if s.version == "" {
		s.version = "dev"
	}
	if s.keepAlive <= 0 {
		s.keepAlive = DefaultKeepAlive
	}
	jobs := cfg.MaxBundleJobs
	if jobs <= 0 {
		jobs = DefaultMaxBundleJobs
	}
	s.bundleJobs = make(chan struct{}, jobs)
	maxBody := cfg.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	bodyTimeout, uploadTimeout := cfg.BodyTimeout, cfg.UploadTimeout
	if bodyTimeout <= 0 {
		bodyTimeout = DefaultBodyTimeout
	}
	if uploadTimeout <= 0 {
		uploadTimeout = DefaultUploadTimeout
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}

	// Requests are validated against the very bytes GET /openapi.yaml
	// serves (oapi-codegen's embedded copy capitalises operationIds).
	spec, err := openapi3.NewLoader().LoadFromData(contract.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("load embedded contract: %w", err)
	}
	sum := sha256.Sum256(contract.OpenAPI)
	s.contractETag = `"` + hex.EncodeToString(sum[:]) + `"`
	s.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	routes := newRouteIndex(spec)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}

	r := chi.NewRouter()
	if cfg.TracerProvider != nil {
		r.Use(nameSpan)
	}
	// Authentication comes before the body limit: a caller without a valid
	// token learns that (401 with its challenge), not how large a body
	// would be accepted.
	// HEAD is served wherever GET is (GetHead routes it to the GET
	// operation; net/http sends the headers without the body).
	r.Use(requestID, s.observe(m, routes), s.recoverer, s.authenticate(r, routes, publicOperations(spec)), s.limitBody(maxBody, bodyTimeout, uploadTimeout),
		middleware.GetHead)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { s.writeProblem(w, r, errNoRoute) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// chi answers every method it does not know here, whatever the
		// path: a path that takes no method at all is unknown.
		allow := allowedMethods(r, routingPath(req))
		if allow == "" {
			s.writeProblem(w, req, errNoRoute)
			return
		}
		w.Header().Set("Allow", allow)
		s.writeProblem(w, req, errMethodNotAllowed)
	})

	strict := api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{withHTTPRequest, s.authorize},
		api.StrictHTTPServerOptions{
			RequestErrorHandlerFunc:  s.bodyError,
			ResponseErrorHandlerFunc: s.writeProblem,
		})
	api.HandlerWithOptions(strict, api.ChiServerOptions{
		BaseRouter:       r,
		Middlewares:      []api.MiddlewareFunc{s.validate(routes)},
		ErrorHandlerFunc: s.paramError,
	})
	var h http.Handler = r
	if cfg.TracerProvider != nil {
		h = traced(r, cfg.TracerProvider, cfg.Propagator)
	}
	if cfg.Console != nil {
		return withConsole(h, cfg.Console), nil
	}
	return h, nil
}

// withConsole sends /ui and /ui/... to console, before the API's
// middleware (no authentication: static files only), and everything else
// to api.
func withConsole(api, console http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "/ui" || strings.HasPrefix(p, "/ui/") {
			console.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// allowedMethods lists the methods routed for path, for the Allow header
// of a 405: HEAD wherever GET is.
func allowedMethods(r chi.Routes, path string) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	return strings.Join(allow, ", ")
}
