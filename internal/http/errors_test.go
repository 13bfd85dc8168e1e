package http_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	"hxd/internal/hxtest"
	"hxd/internal/journal"
	hxruntime "hxd/internal/runtime"
)

// secret marks internal error text that must never reach a client.
const secret = "SECRET-INTERNAL-DETAIL"

func TestProblems(t *testing.T) {
	t.Parallel()

	session := `{"agent":{"name":"demo","version":"v1"}}`
	tests := []struct {
		name   string
		stub   func(f *fakeService)
		req    request
		status int
		code   string
		detail string // substring of the detail, when one is expected
	}{
		{name: "malformed JSON", req: request{method: "POST", path: "/sessions", body: `{"agent":`},
			status: 400, code: "invalid_request", detail: "not valid JSON"},
		{name: "missing agent", req: request{method: "POST", path: "/sessions", body: `{"recording":true}`},
			status: 400, code: "invalid_request", detail: `"agent"`},
		{name: "agent of the wrong type", req: request{method: "POST", path: "/sessions", body: `{"agent":"demo"}`},
			status: 400, code: "invalid_request", detail: "/agent"},
		{name: "unknown field", req: request{method: "POST", path: "/sessions", body: `{"agent":{"name":"demo","version":"v1"},"bogus":1}`},
			status: 400, code: "invalid_request", detail: "bogus"},
		{name: "empty body", req: request{method: "POST", path: "/sessions", header: map[string]string{"Content-Type": "application/json"}},
			status: 400, code: "invalid_request", detail: "required"},
		{name: "wrong content type", req: request{method: "POST", path: "/sessions", body: session,
			header: map[string]string{"Content-Type": "text/plain"}}, status: 415, code: "unsupported_media_type", detail: "application/json"},
		{name: "session_id too long in body", req: request{method: "POST", path: "/sessions",
			body: `{"agent":{"name":"demo","version":"v1"},"session_id":"` + strings.Repeat("a", 201) + `"}`},
			status: 400, code: "invalid_request", detail: "/session_id"},
		{name: "session_id with a bad character", req: request{method: "POST", path: "/sessions",
			body: `{"agent":{"name":"demo","version":"v1"},"session_id":"a b"}`}, status: 400, code: "invalid_request", detail: "/session_id"},
		{name: "session_id too long in path", req: request{method: "GET", path: "/sessions/" + strings.Repeat("a", 201)},
			status: 400, code: "invalid_request", detail: `"session_id"`},
		{name: "null tool result content", req: request{method: "POST", path: "/sessions/s1/tools/k/resolve",
			body: `{"result":{"tool_call_id":"call_1","content":null}}`}, status: 400, code: "invalid_request", detail: "/result/content"},
		{name: "limit=0", req: request{method: "GET", path: "/sessions?limit=0"}, status: 400, code: "invalid_request", detail: `"limit"`},
		{name: "limit=1001", req: request{method: "GET", path: "/sessions/s1/runs?limit=1001"}, status: 400, code: "invalid_request", detail: `"limit"`},
		{name: "limit not a number", req: request{method: "GET", path: "/sessions?limit=many"}, status: 400, code: "invalid_request", detail: `"limit"`},
		{name: "wait=999", req: request{method: "POST", path: "/sessions/s1/runs?wait=999", body: `{"message":"hi"}`},
			status: 400, code: "invalid_request", detail: `"wait"`},
		{name: "empty message", req: request{method: "POST", path: "/sessions/s1/runs", body: `{"message":""}`},
			status: 400, code: "invalid_request", detail: "/message"},
		{name: "message of the wrong type", req: request{method: "POST", path: "/sessions/s1/runs", body: `{"message":{"text":"hi"}}`},
			status: 400, code: "invalid_request", detail: "/message"},
		{name: "Idempotency-Key differs from request_id", req: request{method: "POST", path: "/sessions/s1/runs",
			body: `{"message":"hi","request_id":"a"}`, header: map[string]string{"Idempotency-Key": "b"}},
			status: 400, code: "invalid_request", detail: "Idempotency-Key"},
		{name: "bad Last-Event-ID", req: request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Last-Event-ID": "x"}},
			status: 400, code: "invalid_request", detail: "Last-Event-ID"},
		{name: "approve without allow", req: request{method: "POST", path: "/sessions/s1/tools/k/approve", body: `{"resume":true}`},
			status: 400, code: "invalid_request", detail: `"allow"`},
		{name: "unknown path", req: request{method: "GET", path: "/nope"}, status: 404, code: "not_found"},
		{name: "wrong method", req: request{method: "DELETE", path: "/sessions"}, status: 405, code: "method_not_allowed"},
		{name: "unknown session", stub: func(f *fakeService) {
			f.GetSessionFunc = func(context.Context, string) (*hxruntime.Session, error) {
				return nil, fmt.Errorf("load session %s: %w", secret, hxruntime.ErrNotFound)
			}
		}, req: request{method: "GET", path: "/sessions/a%20weird%20id"}, status: 404, code: "not_found"},
		{name: "unknown run", stub: func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, hxruntime.ErrNotFound }
		}, req: request{method: "GET", path: "/runs/nope"}, status: 404, code: "not_found"},
		{name: "events of an unknown run", stub: func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, hxruntime.ErrNotFound }
		}, req: request{method: "GET", path: "/runs/nope/events"}, status: 404, code: "not_found"},
		{name: "unknown agent version", stub: func(f *fakeService) {
			f.AgentFunc = func(string, string) (*agent.Definition, error) { return nil, hxruntime.ErrNotFound }
		}, req: request{method: "GET", path: "/agents/demo/v9"}, status: 404, code: "not_found"},
		{name: "session exists", stub: func(f *fakeService) {
			f.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
				return nil, hxruntime.ErrSessionExists
			}
		}, req: request{method: "POST", path: "/sessions", body: session}, status: 409, code: "session_exists"},
		{name: "unknown agent", stub: func(f *fakeService) {
			f.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
				return nil, fmt.Errorf("%s: %w", secret, hxruntime.ErrUnknownAgent)
			}
		}, req: request{method: "POST", path: "/sessions", body: session}, status: 422, code: "unknown_agent"},
		{name: "session busy", stub: func(f *fakeService) {
			f.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				return nil, false, hxruntime.ErrSessionBusy
			}
		}, req: request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hi"}`}, status: 409, code: "session_busy"},
		{name: "request id conflict", stub: func(f *fakeService) {
			f.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				return nil, false, hxruntime.ErrRequestConflict
			}
		}, req: request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hi","request_id":"r"}`},
			status: 409, code: "request_id_conflict"},
		{name: "invalid message", stub: func(f *fakeService) {
			f.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				return nil, false, hxruntime.ErrInvalidMessage
			}
		}, req: request{method: "POST", path: "/sessions/s1/runs", body: `{"message":[{"type":"tool_use"}]}`},
			status: 422, code: "invalid_message"},
		{name: "recording mismatch", stub: func(f *fakeService) {
			f.ResumeFunc = func(context.Context, string, hxruntime.ResumeParams) (string, error) {
				return "", &hxruntime.PublicError{Err: hxruntime.ErrRecordingMismatch, Detail: "Recording configuration differs from persisted session"}
			}
		}, req: request{method: "POST", path: "/sessions/s1/resume", body: `{"recording":false}`},
			status: 409, code: "recording_mismatch", detail: "Recording configuration differs"},
		{name: "agent mismatch", stub: func(f *fakeService) {
			f.ResumeFunc = func(context.Context, string, hxruntime.ResumeParams) (string, error) {
				return "", hxruntime.ErrAgentMismatch
			}
		}, req: request{method: "POST", path: "/sessions/s1/resume"}, status: 409, code: "agent_mismatch"},
		{name: "resume busy", stub: func(f *fakeService) {
			f.ResumeFunc = func(context.Context, string, hxruntime.ResumeParams) (string, error) {
				return "", hxruntime.ErrSessionBusy
			}
		}, req: request{method: "POST", path: "/sessions/s1/resume"}, status: 409, code: "session_busy"},
		{name: "resolve with retry and abort", req: request{method: "POST", path: "/sessions/s1/tools/k/resolve",
			body: `{"retry":true,"abort":true}`}, status: 422, code: "resolution_invalid", detail: "exactly one of result, retry, abort"},
		{name: "resolve with nothing", req: request{method: "POST", path: "/sessions/s1/tools/k/resolve", body: `{"resume":true}`},
			status: 422, code: "resolution_invalid", detail: "exactly one"},
		{name: "resolve with result and retry", req: request{method: "POST", path: "/sessions/s1/tools/k/resolve",
			body: `{"retry":true,"result":{"tool_call_id":"c","content":"x"}}`}, status: 422, code: "resolution_invalid"},
		{name: "resolution rule from the runtime", stub: func(f *fakeService) {
			f.ResolveFunc = func(context.Context, hxruntime.ResolveParams) (*hxruntime.RunResult, error) {
				return nil, &hxruntime.PublicError{Err: hxruntime.ErrResolutionInvalid, Detail: "Resolution must match tool call ID"}
			}
		}, req: request{method: "POST", path: "/sessions/s1/tools/k/resolve", body: `{"result":{"tool_call_id":"c","content":"x"}}`},
			status: 422, code: "resolution_invalid", detail: "Resolution must match tool call ID"},
		{name: "unknown execution key", stub: func(f *fakeService) {
			f.ApproveFunc = func(context.Context, hxruntime.ApproveParams) (*hxruntime.RunResult, error) {
				return nil, hxruntime.ErrUnknownExecutionKey
			}
		}, req: request{method: "POST", path: "/sessions/s1/tools/k/approve", body: `{"allow":true}`},
			status: 404, code: "unknown_execution_key"},
		{name: "not awaiting resolution", stub: func(f *fakeService) {
			f.ApproveFunc = func(context.Context, hxruntime.ApproveParams) (*hxruntime.RunResult, error) {
				return nil, &hxruntime.PublicError{Err: hxruntime.ErrNotAwaitingResolution, Detail: "Run is not awaiting a resolution"}
			}
		}, req: request{method: "POST", path: "/sessions/s1/tools/k/approve", body: `{"allow":false}`},
			status: 409, code: "not_awaiting_resolution", detail: "Run is not awaiting a resolution"},
		{name: "invalid cursor", stub: func(f *fakeService) {
			f.ListSessionsFunc = func(context.Context, hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
				return hxruntime.Page[hxruntime.Session]{}, &hxruntime.PublicError{Err: hxruntime.ErrInvalidCursor, Detail: "cursor is not one this server issued"}
			}
		}, req: request{method: "GET", path: "/sessions?cursor=zzz"}, status: 400, code: "invalid_request", detail: "cursor"},
		{name: "not ready", stub: func(f *fakeService) {
			f.ReadyFunc = func(context.Context) error { return errors.New(secret) }
		}, req: request{method: "GET", path: "/readyz"}, status: 503, code: "unavailable"},
		{name: "handler panic", stub: func(f *fakeService) {
			f.GetSessionFunc = func(context.Context, string) (*hxruntime.Session, error) { panic(secret) }
		}, req: request{method: "GET", path: "/sessions/s1"}, status: 500, code: "internal"},
		{name: "unmapped error", stub: func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) {
				return nil, fmt.Errorf("query runs: %s", secret)
			}
		}, req: request{method: "GET", path: "/runs/r1"}, status: 500, code: "internal"},
		{name: "unmapped public error keeps its detail private", stub: func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) {
				return nil, &hxruntime.PublicError{Err: hxruntime.ErrRecording, Detail: secret}
			}
		}, req: request{method: "GET", path: "/runs/r1"}, status: 500, code: "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			if tt.stub != nil {
				tt.stub(tb.svc)
			}
			resp, body := tb.do(t, tt.req)
			p := requireProblem(t, resp, body, tt.status, tt.code)
			require.NotContains(t, string(body), secret)
			require.NotContains(t, string(body), errNotStubbed.Error())
			if tt.detail != "" {
				require.NotNil(t, p.Detail)
				require.Contains(t, *p.Detail, tt.detail)
			}
			if tt.status == 500 {
				require.Equal(t, "Internal server error", p.Title)
				require.Nil(t, p.Detail)
				// The real error is logged once, with the request id.
				require.Len(t, tb.logs.matching(secret, `"request_id":"`+p.RequestId+`"`, `"level":"ERROR"`), 1)
			}
			if tt.status == 405 {
				require.Equal(t, "GET, HEAD, POST", resp.Header.Get("Allow"))
			}
		})
	}
}

// TestUnavailable: storage that cannot take writes for now
// (ErrUnavailable, or an OS error of a full disk or of no descriptors
// left) answers 503 unavailable with Retry-After on every path that
// reaches storage, never 500.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	down := fmt.Errorf("commit: %w: database or disk is full (%s)", hxruntime.ErrUnavailable, secret)
	noFiles := fmt.Errorf("lock session s1: open lock file: %w", &fs.PathError{Op: "open", Path: "/" + secret, Err: syscall.EMFILE})
	run := &hxruntime.RunResult{SessionID: "s1", RunID: "r1", Status: hxruntime.StatusRunning, Pending: []hxruntime.PendingTool{}}
	tests := []struct {
		name string
		stub func(f *fakeService)
		req  request
	}{
		{"readiness", func(f *fakeService) { f.ReadyFunc = func(context.Context) error { return down } },
			request{method: "GET", path: "/readyz"}},
		{"create session", func(f *fakeService) {
			f.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) { return nil, down }
		}, request{method: "POST", path: "/sessions", body: `{"agent":{"name":"demo","version":"v1"}}`}},
		{"list sessions", func(f *fakeService) {
			f.ListSessionsFunc = func(context.Context, hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
				return hxruntime.Page[hxruntime.Session]{}, down
			}
		}, request{method: "GET", path: "/sessions"}},
		{"submit", func(f *fakeService) {
			f.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				return nil, false, fmt.Errorf("submit run: %w: commit run r1: %w", hxruntime.ErrRecording, down)
			}
		}, request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hi"}`}},
		{"submit without descriptors", func(f *fakeService) {
			f.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				return nil, false, noFiles
			}
		}, request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hi"}`}},
		{"get run", func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "GET", path: "/runs/r1"}},
		{"event stream", func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Accept": "text/event-stream"}}},
		{"event page", func(f *fakeService) {
			f.GetRunFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return run, nil }
			f.ListEventsFunc = func(context.Context, string, int64, int) ([]hxruntime.RunEvent, error) { return nil, down }
		}, request{method: "GET", path: "/runs/r1/events", header: map[string]string{"Accept": "application/json"}}},
		{"export", func(f *fakeService) {
			f.ExportFunc = func(context.Context, string, func(*hxruntime.Incident) error) error { return down }
		}, request{method: "POST", path: "/runs/r1/export", body: `{}`}},
		{"pause", func(f *fakeService) {
			f.PauseFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "POST", path: "/sessions/s1/pause"}},
		{"cancel", func(f *fakeService) {
			f.CancelFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "POST", path: "/sessions/s1/cancel"}},
		{"resume", func(f *fakeService) {
			f.ResumeFunc = func(context.Context, string, hxruntime.ResumeParams) (string, error) { return "", noFiles }
		}, request{method: "POST", path: "/sessions/s1/resume"}},
		{"pending", func(f *fakeService) {
			f.PendingFunc = func(context.Context, string) ([]hxruntime.PendingTool, error) { return nil, down }
		}, request{method: "GET", path: "/sessions/s1/pending"}},
		{"approve", func(f *fakeService) {
			f.ApproveFunc = func(context.Context, hxruntime.ApproveParams) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "POST", path: "/sessions/s1/tools/k/approve", body: `{"allow":true}`}},
		{"resolve", func(f *fakeService) {
			f.ResolveFunc = func(context.Context, hxruntime.ResolveParams) (*hxruntime.RunResult, error) { return nil, down }
		}, request{method: "POST", path: "/sessions/s1/tools/k/resolve", body: `{"retry":true}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			tt.stub(tb.svc)
			resp, body := tb.do(t, tt.req)
			p := requireProblem(t, resp, body, 503, "unavailable")
			require.Equal(t, "Service unavailable", p.Title)
			require.NotContains(t, string(body), secret)
			secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
			require.NoError(t, err, "Retry-After: %q", resp.Header.Get("Retry-After"))
			require.Positive(t, secs)
		})
	}
}

// TestUnknownMethod: a method no route takes is a 405 naming the methods
// the path does take, and a 404 on a path that takes none (a 405 must
// list what is allowed).
func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	resp, body := tb.do(t, request{method: "XYZZY", path: "/healthz"})
	requireProblem(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))

	resp, body = tb.do(t, request{method: "XYZZY", path: "/nope"})
	requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	require.Empty(t, resp.Header.Values("Allow"))

	// An escaped slash stays inside its path parameter, as in routing.
	resp, body = tb.do(t, request{method: "DELETE", path: "/runs/a%2Fb"})
	requireProblem(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
}

func TestProblemDetailIsBounded(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	huge := strings.Repeat("x", 50_000)
	resp, body := tb.do(t, request{method: "POST", path: "/sessions", body: `{"agent":{"name":"demo","version":"v1"},"` + huge + `":1}`})
	p := requireProblem(t, resp, body, 400, "invalid_request")
	require.NotNil(t, p.Detail)
	require.LessOrEqual(t, len(*p.Detail), 300)
	require.Less(t, len(body), 2000)
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	tb := setup(t, func(c *hxhttp.Config) { c.MaxBodyBytes = 1024 })
	big := `{"message":"` + strings.Repeat("a", 2048) + `"}`

	// Declared length over the limit.
	resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: big})
	requireProblem(t, resp, body, http.StatusRequestEntityTooLarge, "payload_too_large")

	// Undeclared length (chunked): fails while reading.
	req, err := http.NewRequestWithContext(t.Context(), "POST", tb.srv.URL+"/sessions/s1/runs", io.MultiReader(strings.NewReader(big)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp2, err := tb.srv.Client().Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, resp2.Body)
	body2, err := io.ReadAll(resp2.Body)
	require.NoError(t, err)
	requireProblem(t, resp2, body2, http.StatusRequestEntityTooLarge, "payload_too_large")
}

// TestBodyTimeout: a body that does not arrive within the body timeout
// (or an upload within the upload timeout) is a 408 request_timeout on a
// connection that then closes; a request whose body arrived may take
// longer than that (a submission waiting for its run).
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	tb := setup(t, func(c *hxhttp.Config) { c.BodyTimeout, c.UploadTimeout = timeout, timeout })
	for path, ct := range map[string]string{"/sessions": "application/json", "/bundles/verify": "application/zip"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", tb.srv.Listener.Addr().String())
			require.NoError(t, err)
			defer hxtest.Close(t, conn)
			_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: 100\r\n\r\n{\"agent\"", path, ct)
			require.NoError(t, err)
			require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Less(t, time.Since(start), 5*time.Second)
			requireProblem(t, resp, body, http.StatusRequestTimeout, "request_timeout")
			require.True(t, resp.Close, "the connection closes")
		})
	}

	var waited atomic.Bool
	tb.svc.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
		return runFixture(hxruntime.StatusRunning), true, nil
	}
	tb.svc.WaitRunFunc = func(ctx context.Context, _ string, _ time.Duration) (*hxruntime.RunResult, error) {
		select {
		case <-time.After(3 * timeout):
			waited.Store(true)
			return runFixture(hxruntime.StatusCompleted), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs?wait=5", body: `{"message":"hi"}`})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	require.True(t, waited.Load(), "the wait outlived the body timeout")
}

// TestBodyOneUTF8Value: a body must be UTF-8 and one JSON value; white
// space may follow it, nothing else. The refused bodies never reach the
// service.
func TestBodyOneUTF8Value(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	var calls atomic.Int32
	tb.svc.SubmitRunFunc = func(context.Context, hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
		calls.Add(1)
		return nil, false, hxruntime.ErrSessionBusy
	}
	for _, tc := range []struct{ body, detail string }{
		{`{"message":"hi"}{"message":"x"}`, "request body holds more than one JSON value"},
		{`{"message":"hi"} garbage`, "request body holds more than one JSON value"},
		{`{"message":"hi"},`, "request body holds more than one JSON value"},
		{`{"message":"hi"} 1`, "request body holds more than one JSON value"},
		{`{"message":"a` + "\xff" + `b"}`, "request body is not valid UTF-8"},
		{`{"message":"hi","request_id":"r` + "\xc3" + `"}`, "request body is not valid UTF-8"},
		{`{"message":"hi","message":"x"}`, "request body repeats a key in an object"},
		{`{"message":[{"type":"text","text":"a","text":"b"}]}`, "request body repeats a key in an object"},
		{`{"message":"hi","metadata_n":1e999}`, "request body holds a number beyond the range of a float"},
		{`{"message":"\ud800"}`, "request body holds a lone surrogate escape"},
	} {
		resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: tc.body})
		p := requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
		require.NotNil(t, p.Detail, tc.body)
		require.Equal(t, tc.detail, *p.Detail, tc.body)
	}
	// JSON can spell NUL, but no stored text can hold it (PostgreSQL).
	resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hi","request_id":"r\u0000"}`})
	p := requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	require.NotNil(t, p.Detail)
	require.Contains(t, *p.Detail, "request_id")
	require.Zero(t, calls.Load())
	// White space around the value is fine, and so is UTF-8 beyond ASCII.
	resp, body = tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: " \n{\"message\":\"grüße ✓\"}\r\n\t "})
	requireProblem(t, resp, body, http.StatusConflict, "session_busy")
	require.EqualValues(t, 1, calls.Load())
	// A body that is not JSON keeps the validator's answer.
	resp, body = tb.do(t, request{method: "POST", path: "/sessions/s1/runs", body: `{"message":`})
	p = requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	require.NotNil(t, p.Detail)
	require.NotContains(t, *p.Detail, "more than one JSON value")
}

// TestPathParameterNamesNothing: an id holding NUL or bytes that are not
// UTF-8 cannot name anything hxd stores (PostgreSQL's text holds neither):
// 404 like any unknown id, without asking the service.
func TestPathParameterNamesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t) // nothing stubbed: a call to the service would be a 500
	for _, rq := range []request{
		{method: "GET", path: "/sessions/a%00b"},
		{method: "GET", path: "/sessions/a%FFb"},
		{method: "GET", path: "/sessions/a%00b/runs"},
		{method: "GET", path: "/sessions/a%00b/pending"},
		{method: "POST", path: "/sessions/a%C3/runs", body: `{"message":"hi"}`},
		{method: "GET", path: "/runs/a%00b"},
		{method: "GET", path: "/runs/a%FFb/events"},
		{method: "POST", path: "/sessions/s1/tools/k%00/approve", body: `{}`},
		{method: "GET", path: "/agents/demo%00/v1"},
	} {
		resp, body := tb.do(t, rq)
		requireProblem(t, resp, body, http.StatusNotFound, "not_found")
	}
}

func TestBodyDepth(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	calls := 0
	tb.svc.CreateSessionFunc = func(context.Context, hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
		calls++
		return nil, hxruntime.ErrSessionExists
	}
	session := func(levels int) string {
		return `{"agent":{"name":"demo","version":"v1"},"metadata":` +
			strings.Repeat(`{"a":`, levels) + `"[[[{{{"` + strings.Repeat(`}`, levels) + `}`
	}
	// The body's own object is one level: 127 more reach the limit, and
	// the request gets to the service.
	resp, body := tb.do(t, request{method: "POST", path: "/sessions", body: session(journal.MaxInputDepth - 1)})
	requireProblem(t, resp, body, http.StatusConflict, "session_exists")
	require.Equal(t, 1, calls)

	resp, body = tb.do(t, request{method: "POST", path: "/sessions", body: session(journal.MaxInputDepth)})
	p := requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
	require.NotNil(t, p.Detail)
	require.Equal(t, "request body nests arrays and objects more than 128 levels deep", *p.Detail)
	require.Equal(t, 1, calls)

	// Far deeper than encoding/json reads (10,000): the same answer.
	resp, body = tb.do(t, request{method: "POST", path: "/sessions/s1/runs",
		body: `{"message":` + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}`})
	requireProblem(t, resp, body, http.StatusBadRequest, "invalid_request")
}
