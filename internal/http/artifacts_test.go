package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

func TestGetArtifact(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("ab", 32)
	tb := setup(t)
	var asked []string
	tb.svc.ArtifactFunc = func(ctx context.Context, sha string) ([]byte, error) {
		require.Equal(t, hxruntime.LocalPrincipal, hxruntime.PrincipalFrom(ctx))
		asked = append(asked, sha)
		if sha == key {
			return []byte("<html>tool output</html>"), nil
		}
		return nil, fmt.Errorf("artifact: %w", hxruntime.ErrNotFound)
	}

	resp, body := tb.do(t, request{method: "GET", path: "/artifacts/" + key})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "<html>tool output</html>", string(body))
	require.Equal(t, "application/octet-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "24", resp.Header.Get("Content-Length"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, `attachment; filename="`+key+`"`, resp.Header.Get("Content-Disposition"))
	require.Equal(t, `"`+key+`"`, resp.Header.Get("ETag"))

	// Any other key, whatever its shape, is 404 (never 400).
	for _, k := range []string{strings.Repeat("cd", 32), "nope", strings.ToUpper(key), "a%20b", strings.Repeat("x", 200)} {
		resp, body := tb.do(t, request{method: "GET", path: "/artifacts/" + k})
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	}
	require.Len(t, asked, 6)
}
