package http

import (
	"bytes"
	"context"
	"net/http"
	"strconv"

	"hxd/internal/http/api"
)

// GetArtifact serves an artifact's bytes to a caller owning a session that
// references it; anything else, whatever the key's shape, is 404. The
// bytes are served as an opaque download (octet-stream, attachment,
// nosniff) so that a browser never renders what a tool produced.
func (s *Server) GetArtifact(ctx context.Context, req api.GetArtifactRequestObject) (api.GetArtifactResponseObject, error) {
	data, err := s.svc.Artifact(ctx, req.Sha256)
	if err != nil {
		return nil, err
	}
	return artifactResponse{key: req.Sha256, data: data}, nil
}

// artifactResponse is the 200 answer of getArtifact (the generated one
// cannot set Content-Disposition or Cache-Control).
type artifactResponse struct {
	key  string
	data []byte
}

// VisitGetArtifactResponse implements api.GetArtifactResponseObject.
func (a artifactResponse) VisitGetArtifactResponse(w http.ResponseWriter) error {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(a.data)))
	h.Set("Content-Disposition", attachment(a.key))
	h.Set("ETag", `"`+a.key+`"`)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = bytes.NewReader(a.data).WriteTo(w) // a failure here is the client going away
	return nil
}
