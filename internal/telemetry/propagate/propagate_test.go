package propagate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"hxd/internal/hxtest"
	"hxd/internal/telemetry/propagate"
)

// TestInjectTransport: with the propagator Setup installs, a request whose
// context holds a span carries its traceparent, and its own headers are
// left alone; without a span nothing is added. (It sets the global
// propagator, so it does not run in parallel.)
func TestInjectTransport(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer srv.Close()
	client := &http.Client{Transport: propagate.InjectTransport(nil)}

	spanCtx := hxtest.TracedContext(t, context.Background())
	for _, tc := range []struct {
		name     string
		withSpan bool
		want     string
	}{
		{"span", true, hxtest.TraceParent},
		{"no span", false, ""},
	} {
		ctx := context.Background()
		if tc.withSpan {
			ctx = spanCtx
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if h := <-got; h != tc.want {
			t.Errorf("%s: traceparent %q, want %q", tc.name, h, tc.want)
		}
		if req.Header.Get("traceparent") != "" {
			t.Errorf("%s: the caller's request was changed", tc.name)
		}
	}

	h := http.Header{}
	propagate.Inject(spanCtx, h)
	if h.Get("traceparent") == "" {
		t.Error("Inject wrote no traceparent")
	}
}
