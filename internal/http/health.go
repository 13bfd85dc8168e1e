package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	contract "hxd/api"
	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// GetHealth answers 200 while the process serves HTTP.
func (s *Server) GetHealth(_ context.Context, _ api.GetHealthRequestObject) (api.GetHealthResponseObject, error) {
	return api.GetHealth200JSONResponse{Status: api.Ok, Version: s.version}, nil
}

// GetReady answers 200 when storage is reachable and the schema current,
// else 503 unavailable.
func (s *Server) GetReady(ctx context.Context, _ api.GetReadyRequestObject) (api.GetReadyResponseObject, error) {
	if err := s.svc.Ready(ctx); err != nil {
		if !errors.Is(err, hxruntime.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", hxruntime.ErrUnavailable, err)
		}
		return nil, err
	}
	return api.GetReady200JSONResponse{Status: api.Ready, Version: s.version}, nil
}

// GetOpenAPI serves the contract the server was built from: the bytes of
// api/openapi.yaml as committed, with a strong ETag; 304 when the
// caller's If-None-Match names it.
func (s *Server) GetOpenAPI(_ context.Context, req api.GetOpenAPIRequestObject) (api.GetOpenAPIResponseObject, error) {
	etag := s.contractETag
	if req.Params.IfNoneMatch != nil && etagListMatches(*req.Params.IfNoneMatch, etag) {
		return api.GetOpenAPI304Response{Headers: api.GetOpenAPI304ResponseHeaders{ETag: &etag}}, nil
	}
	return api.GetOpenAPI200ApplicationyamlResponse{
		Body: bytes.NewReader(contract.OpenAPI), ContentLength: int64(len(contract.OpenAPI)),
		Headers: api.GetOpenAPI200ResponseHeaders{ETag: &etag},
	}, nil
}

// etagListMatches reports whether an If-None-Match value (RFC 9110
// §13.1.2: "*" or a comma-separated list of entity tags) matches etag,
// by weak comparison (a W/ prefix is ignored on either side).
func etagListMatches(list, etag string) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	want := strings.TrimPrefix(etag, "W/")
	for _, tag := range strings.Split(list, ",") {
		if strings.TrimPrefix(strings.TrimSpace(tag), "W/") == want {
			return true
		}
	}
	return false
}

// GetMetrics serves the registry in the Prometheus exposition format.
func (s *Server) GetMetrics(ctx context.Context, _ api.GetMetricsRequestObject) (api.GetMetricsResponseObject, error) {
	r, ok := httpRequestFrom(ctx)
	if !ok {
		return nil, errors.New("get metrics: no request in context")
	}
	return metricsResponse{h: s.metrics, r: r}, nil
}

// metricsResponse lets promhttp write the response (format negotiation,
// compression) for the strict server.
type metricsResponse struct {
	h http.Handler
	r *http.Request
}

// VisitGetMetricsResponse implements api.GetMetricsResponseObject.
func (m metricsResponse) VisitGetMetricsResponse(w http.ResponseWriter) error {
	m.h.ServeHTTP(w, m.r)
	return nil
}
