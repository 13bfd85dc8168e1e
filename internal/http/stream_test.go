package http_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	hxruntime "hxd/internal/runtime"
)

// TestSubmitRunStream: the submit body's stream reaches the runtime;
// absent, it is off.
func TestSubmitRunStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"message":"hi","stream":true}`, true},
		{`{"message":"hi","stream":false}`, false},
		{`{"message":"hi"}`, false},
	} {
		t.Run(tc.body, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			got := make(chan bool, 1)
			tb.svc.SubmitRunFunc = func(_ context.Context, p hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				got <- p.Stream
				return runFixture(hxruntime.StatusRunning), true, nil
			}
			resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: tc.body})
			require.Equal(t, 202, resp.StatusCode, "body: %s", body)
			require.Equal(t, tc.want, <-got)
		})
	}
}
