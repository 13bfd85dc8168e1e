package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

type requestIDKey struct{}

// maxRequestIDLen bounds a caller-supplied X-Request-ID.
const maxRequestIDLen = 128

// requestID takes a well-formed X-Request-ID from the caller or makes a new
// one (UUIDv7), puts it into the context and echoes it in the response.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-ID")
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-ID", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
	})
}

func newRequestID() string {
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// requestIDFrom returns the request id put into ctx by the middleware.
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// recoverer turns a handler panic into a 500 `internal` problem (logged
// once, with the stack, by writeProblem). http.ErrAbortHandler is
// re-raised, as net/http expects.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // sentinel panic value, compared as net/http does
				panic(v)
			}
			s.writeProblem(w, r, &panicError{Value: v, Stack: debug.Stack()})
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody bounds the request body: a declared length over the limit is
// refused at once, an undeclared one fails when the reader passes it, and
// a body must arrive within timeout (timedBody). Bundle uploads are exempt
// from the size limit: their handlers bound them by the bundle byte limit
// and answer a larger one as an invalid bundle (see bundleUpload); they
// get uploadTimeout.
func (s *Server) limitBody(limit int64, timeout, uploadTimeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hasBody := r.Body != nil && r.Body != http.NoBody
			if bundleUpload(r) {
				if hasBody {
					r.Body = timedBody(w, r.Body, uploadTimeout)
				}
				next.ServeHTTP(w, r)
				return
			}
			if r.ContentLength > limit {
				s.writeProblem(w, r, &http.MaxBytesError{Limit: limit})
				return
			}
			if hasBody {
				r.Body = http.MaxBytesReader(w, timedBody(w, r.Body, timeout), limit)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// errBodyTimeout: the request body did not arrive within its timeout
// (408 request_timeout).
var errBodyTimeout = errors.New("request body did not arrive in time")

// timedBody sets the connection's read deadline to timeout from now for
// the reading of body: a read that passes it fails with errBodyTimeout,
// and the answer closes the connection. (The deadline stays until the
// connection's next request; net/http still notices a client that goes
// away while a request whose body has arrived waits.)
func timedBody(w http.ResponseWriter, body io.ReadCloser, timeout time.Duration) io.ReadCloser {
	if http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout)) != nil {
		return body // not a connection that takes deadlines
	}
	return &deadlineBody{ReadCloser: body, w: w}
}

type deadlineBody struct {
	io.ReadCloser
	w http.ResponseWriter
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.w.Header().Set("Connection", "close")
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

// metrics are the HTTP server's Prometheus collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hxd_http_requests_total",
			Help: "HTTP requests by operation, method and status (499: the client went away).",
		}, []string{"operation", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hxd_http_request_duration_seconds",
			Help:    "HTTP request duration by operation and method (event streams last as long as they stream).",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation", "method"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

// observe records the access log line and the metrics of every request,
// labelled by the operation (or route pattern) it matched. It never logs
// bodies, query strings or headers.
func (s *Server) observe(m *metrics, routes *routeIndex) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			elapsed := time.Since(start)

			pattern := ""
			if rctx := chi.RouteContext(r.Context()); rctx != nil {
				pattern = rctx.RoutePattern()
			}
			op := routes.operationID(routeMethod(r), pattern)
			status := rec.statusCode()
			method := methodLabel(r.Method)
			m.requests.WithLabelValues(op, method, strconv.Itoa(status)).Inc()
			m.duration.WithLabelValues(op, method).Observe(elapsed.Seconds())
			s.log.InfoContext(r.Context(), "http request",
				"request_id", requestIDFrom(r.Context()),
				"method", r.Method,
				"route", pattern,
				"operation", op,
				"http_status", status,
				"duration_ms", elapsed.Milliseconds(),
				"response_bytes", rec.bytes,
			)
		})
	}
}

// methodLabel is the metrics label of a request method: the method when
// it is one of RFC 9110's (and PATCH), else "other". A caller may send any
// token as a method; labelling by it would let callers add series without
// bound.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// statusRecorder remembers the status and size of a response. It passes
// Flush through and unwraps for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher.
func (w *statusRecorder) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusRecorder) headerWritten() bool { return w.status != 0 }

func (w *statusRecorder) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// headerWritten reports whether a response has started on w (as far as
// the middleware chain can tell).
func headerWritten(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ headerWritten() bool }:
			return t.headerWritten()
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}
