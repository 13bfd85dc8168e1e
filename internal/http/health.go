package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

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

// GetOpenAPI serves the contract the server was built from (YAML).
func (s *Server) GetOpenAPI(_ context.Context, _ api.GetOpenAPIRequestObject) (api.GetOpenAPIResponseObject, error) {
	return api.GetOpenAPI200ApplicationyamlResponse{
		Body: bytes.NewReader(s.contract), ContentLength: int64(len(s.contract)),
	}, nil
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
