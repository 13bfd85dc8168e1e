package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"

	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
)

// routeIndex finds the contract's operation for a chi route pattern. The
// generated router registers the contract's paths verbatim, so a matched
// chi pattern is the OpenAPI path.
type routeIndex struct {
	routes map[string]*routers.Route // "METHOD /path/{param}"
}

// newRouteIndex indexes the operations of spec. Each route holds a copy of
// its operation without security requirements: authentication and roles
// are the authenticate and authorize middleware's, and kin-openapi's
// security check reads the whole request body into memory first (even
// with ExcludeRequestBody), which would take in a bundle upload of any
// size before its handler could bound it.
func newRouteIndex(spec *openapi3.T) *routeIndex {
	idx := &routeIndex{routes: map[string]*routers.Route{}}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			unsecured := *op
			unsecured.Security = &openapi3.SecurityRequirements{}
			idx.routes[method+" "+path] = &routers.Route{
				Spec: spec, Path: path, PathItem: item, Method: method, Operation: &unsecured,
			}
		}
	}
	return idx
}

func (x *routeIndex) route(method, pattern string) *routers.Route {
	return x.routes[method+" "+pattern]
}

// operationID labels a request for metrics: the operationId, or
// "unmatched" when no operation matched.
func (x *routeIndex) operationID(method, pattern string) string {
	if rt := x.route(method, pattern); rt != nil && rt.Operation.OperationID != "" {
		return rt.Operation.OperationID
	}
	return "unmatched"
}

// validate checks each routed request (parameters, headers and body)
// against the embedded contract before the strict handler decodes it; a
// violation is a 400 invalid_request whose detail names the parameter or
// field without echoing the input. It runs inside the generated router, so
// the chi route pattern and URL parameters are known.
func (s *Server) validate(routes *routeIndex) func(http.Handler) http.Handler {
	opts := &openapi3filter.Options{
		// Never rewrite the body: the message must reach the runtime as sent.
		SkipSettingDefaults: true,
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
	}
	// Bundle uploads are archives of up to 64 MiB that the validator would
	// read into memory; their handlers spool and check them instead.
	uploadOpts := *opts
	uploadOpts.ExcludeRequestBody = true
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.RouteContext(r.Context())
			if p := rctx.RoutePattern(); p == "/openapi.yaml" || p == "/metrics" {
				next.ServeHTTP(w, r) // no parameters, no body
				return
			}
			route := routes.route(routeMethod(r), rctx.RoutePattern())
			if route == nil { // every generated route is in the contract
				s.writeProblem(w, r, fmt.Errorf("no contract operation for %s %s", r.Method, rctx.RoutePattern()))
				return
			}
			params := make(map[string]string, len(rctx.URLParams.Keys))
			for i, k := range rctx.URLParams.Keys {
				v := rctx.URLParams.Values[i]
				if r.URL.RawPath != "" {
					if u, err := url.PathUnescape(v); err == nil {
						v = u
					}
				}
				if !nameable(v) {
					s.writeProblem(w, r, fmt.Errorf("path parameter %s: NUL or not UTF-8: %w", k, hxruntime.ErrNotFound))
					return
				}
				params[k] = v
			}
			if err := checkMediaType(r, route.Operation); err != nil {
				if errors.Is(err, errContentEncoding) {
					w.Header().Set("Accept-Encoding", "identity") // RFC 7694 §3
				}
				s.writeProblem(w, r, err)
				return
			}
			o := opts
			if bundleUploadOperations[route.Operation.OperationID] {
				o = &uploadOpts
			} else if err := checkBody(r); err != nil {
				s.writeProblem(w, r, err)
				return
			}
			in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: o}
			if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
				s.writeProblem(w, r, validationError(err))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Why a body is 415 unsupported_media_type (mediaTypeError wraps one).
var (
	errContentEncoding = errors.New("request body has a Content-Encoding other than identity")
	errCharset         = errors.New("request body has a charset other than UTF-8")
	errMediaType       = errors.New("request body has a media type the operation does not take")
)

// mediaTypeError is a body hxd would misread (415 unsupported_media_type).
// Detail is client-safe and never echoes the header.
type mediaTypeError struct {
	Detail string
	Err    error
}

func (e *mediaTypeError) Error() string { return e.Err.Error() }
func (e *mediaTypeError) Unwrap() error { return e.Err }

// checkMediaType refuses, before anything reads it, the body of an
// operation that takes one when hxd would misread it: a Content-Encoding
// other than identity (hxd decodes none, so a compressed body would be
// taken as plain), a charset other than UTF-8 (bodies are read as UTF-8),
// or a media type the operation does not take (the contract's, plus
// application/zip and application/octet-stream for bundle uploads, which
// may also come without a Content-Type). A request without a body, or to
// an operation without one, is not checked.
func checkMediaType(r *http.Request, op *openapi3.Operation) error {
	if r.Body == nil || r.Body == http.NoBody || op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return &mediaTypeError{Detail: errContentEncoding.Error() + " (hxd decodes none: send it unencoded)", Err: errContentEncoding}
			}
		}
	}
	accepted := slices.Sorted(maps.Keys(op.RequestBody.Value.Content))
	bundle := bundleUploadOperations[op.OperationID]
	if bundle {
		accepted = bundleMediaTypes
	}
	want := "request body must be " + strings.Join(accepted, ", ")
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if bundle {
			return nil
		}
		return &mediaTypeError{Detail: want, Err: errMediaType}
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(accepted, mt) {
		return &mediaTypeError{Detail: want, Err: errMediaType}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &mediaTypeError{Detail: errCharset.Error(), Err: errCharset}
	}
	return nil
}

// nameable reports whether a path parameter could name a session, run,
// tool call, agent or artifact: every name hxd stores is UTF-8 without NUL
// (PostgreSQL's text cannot hold either), so any other value names nothing
// and is answered 404 like any unknown id, without a lookup.
func nameable(v string) bool { return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0 }

// checkBody refuses, before the validator decodes it, a request body that
// nests arrays and objects deeper than journal.MaxInputDepth, that is not
// UTF-8, or that holds more than one JSON value (the validator and the
// handlers read only the first, and would drop the rest unseen). A body
// that is not JSON at all is left to the validator, which says why. It
// reads the body (bounded by limitBody) and puts it back.
func checkBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	data, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return validationError(err)
	}
	switch {
	case journal.Deeper(data, journal.MaxInputDepth):
		return &requestError{Detail: fmt.Sprintf("request body nests arrays and objects more than %d levels deep", journal.MaxInputDepth)}
	case !utf8.Valid(data):
		return &requestError{Detail: "request body is not valid UTF-8"}
	}
	if detail := jsonProblem(data); detail != "" {
		return &requestError{Detail: detail}
	}
	return nil
}

// jsonProblem says what is wrong with a body that starts with a whole JSON
// value: anything but white space after it, or JSON that has no canonical
// form (what it holds is journaled and exported as canonical JSON, which
// would then fail): a key repeated in an object, a number beyond float
// range, a lone surrogate escape. "" when nothing is, or when data does
// not start with a whole JSON value (the validator says why).
func jsonProblem(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if dec.Decode(&first) != nil {
		return ""
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "request body holds more than one JSON value"
	}
	err := journal.CheckCanonical(first)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, journal.ErrDuplicateKey):
		return "request body repeats a key in an object"
	case errors.Is(err, journal.ErrNonFinite):
		return "request body holds a number beyond the range of a float"
	case errors.Is(err, journal.ErrLoneSurrogate):
		return "request body holds a lone surrogate escape"
	}
	return "request body is not valid JSON"
}

// validationError turns a kin-openapi validation failure into a
// requestError (or passes a body-size failure through as 413).
func validationError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) || errors.Is(err, errBodyTimeout) {
		return err
	}
	return &requestError{Detail: validationDetail(err), Err: err}
}

// validationDetail is a short, client-safe description of a validation
// failure: where (parameter or body field) and the schema rule broken.
func validationDetail(err error) string {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return "request does not match the contract"
	}
	reason := re.Reason
	var where string
	var se *openapi3.SchemaError
	if errors.As(re.Err, &se) {
		reason = se.Reason
		if p := se.JSONPointer(); len(p) > 0 {
			where = "/" + strings.Join(p, "/")
		}
	}
	switch {
	case re.Parameter != nil:
		if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			reason = "is required"
		}
		return fmt.Sprintf("%s parameter %q: %s", re.Parameter.In, re.Parameter.Name, orDefault(reason, "is invalid"))
	case re.RequestBody != nil:
		switch {
		case errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
			return "request body is required"
		case re.Reason == "failed to decode request body":
			return "request body is not valid JSON"
		case strings.HasPrefix(re.Reason, "header Content-Type"):
			return "request body must be application/json"
		case where != "":
			return fmt.Sprintf("request body field %s: %s", where, orDefault(reason, "is invalid"))
		}
		return "request body: " + orDefault(reason, "is invalid")
	}
	return "request does not match the contract"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
