package http_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/http/api"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
)

func TestEndpointsHappyPath(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name   string
		stub   func(t *testing.T, f *fakeService)
		req    request
		status int
		check  func(t *testing.T, body []byte)
	}{
		{
			name:   "healthz",
			req:    request{method: "GET", path: "/healthz"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"status":"ok","version":"test"}`, string(body))
			},
		},
		{
			name:   "readyz",
			stub:   func(_ *testing.T, f *fakeService) { f.ReadyFunc = func(context.Context) error { return nil } },
			req:    request{method: "GET", path: "/readyz"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"status":"ready","version":"test"}`, string(body))
			},
		},
		{
			name: "list agents without secrets",
			stub: func(_ *testing.T, f *fakeService) {
				f.AgentsFunc = func() []*agent.Definition { return []*agent.Definition{agentFixture()} }
			},
			req:    request{method: "GET", path: "/agents"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"items":[{"name":"demo","version":"v1","system_prompt":"You help.",
					"model":{"provider":"openai","model":"gpt-4o-mini"},
					"tools":[
					 {"name":"echo","description":"Echo.","kind":"builtin","replay_policy":"safe","permission":"allow"},
					 {"name":"refund","kind":"webhook","replay_policy":"manual","permission":"ask"}]}]}`, string(body))
				for _, secret := range []string{"OPENAI_API_KEY", "hunter2", "s3cret", "example"} {
					require.NotContains(t, string(body), secret)
				}
			},
		},
		{
			name: "get agent",
			stub: func(t *testing.T, f *fakeService) {
				f.AgentFunc = func(name, version string) (*agent.Definition, error) {
					require.Equal(t, "demo", name)
					require.Equal(t, "v1", version)
					return agentFixture(), nil
				}
			},
			req:    request{method: "GET", path: "/agents/demo/v1"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				a := decode[api.Agent](t, body)
				require.Equal(t, "demo", a.Name)
				require.Len(t, a.Tools, 2)
			},
		},
		{
			name: "get agent with a fallback chain",
			stub: func(t *testing.T, f *fakeService) {
				f.AgentFunc = func(string, string) (*agent.Definition, error) {
					d := agentFixture()
					d.Model.Fallback = []model.Config{{
						Provider: model.ProviderAnthropic, Model: "claude-sonnet-4-5",
						BaseURL: "https://user:hunter2@gw.example/", APIKeyEnv: "ANTHROPIC_API_KEY",
					}}
					return d, nil
				}
			},
			req:    request{method: "GET", path: "/agents/demo/v1"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				a := decode[api.Agent](t, body)
				require.NotNil(t, a.Model.Fallback)
				require.Equal(t, []api.AgentFallbackModel{{Provider: "anthropic", Model: ptr("claude-sonnet-4-5")}}, *a.Model.Fallback)
				for _, secret := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "hunter2", "example"} {
					require.NotContains(t, string(body), secret)
				}
			},
		},
		{
			name: "create session",
			stub: func(t *testing.T, f *fakeService) {
				f.CreateSessionFunc = func(_ context.Context, p hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
					require.Equal(t, agent.Ref{Name: "demo", Version: "v1"}, p.Agent)
					require.Equal(t, ptr(true), p.Recording)
					require.Equal(t, "incident-42", p.SessionID)
					require.JSONEq(t, `{"customer":"acme"}`, string(p.Metadata))
					return sessionFixture(), nil
				}
			},
			req: request{method: "POST", path: "/sessions",
				body: `{"agent":{"name":"demo","version":"v1"},"recording":true,"session_id":"incident-42","metadata":{"customer":"acme"}}`},
			status: 201,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"session_id":"s1","agent":{"name":"demo","version":"v1"},"recording":true,
					"metadata":{"customer":"acme"},"created_at":"2025-01-02T03:04:05Z",
					"latest_run":{"run_id":"r1","status":"completed"},"mcp_tools":[]}`, string(body))
			},
		},
		{
			name: "create session minimal",
			stub: func(t *testing.T, f *fakeService) {
				f.CreateSessionFunc = func(_ context.Context, p hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
					require.Nil(t, p.Recording)
					require.Empty(t, p.SessionID)
					require.Nil(t, p.Metadata)
					s := sessionFixture()
					s.Metadata, s.LatestRun = nil, nil
					return s, nil
				}
			},
			req:    request{method: "POST", path: "/sessions", body: `{"agent":{"name":"demo","version":"v1"}}`},
			status: 201,
			check: func(t *testing.T, body []byte) {
				s := decode[map[string]any](t, body)
				require.Nil(t, s["latest_run"])
				require.Equal(t, map[string]any{}, s["metadata"])
			},
		},
		{
			name: "list sessions",
			stub: func(t *testing.T, f *fakeService) {
				f.ListSessionsFunc = func(_ context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
					require.Equal(t, hxruntime.SessionListParams{ListParams: hxruntime.ListParams{Cursor: "c1", Limit: 10}}, p)
					return hxruntime.Page[hxruntime.Session]{Items: []hxruntime.Session{*sessionFixture()}, NextCursor: "c2"}, nil
				}
			},
			req:    request{method: "GET", path: "/sessions?limit=10&cursor=c1"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				l := decode[api.SessionList](t, body)
				require.Len(t, l.Items, 1)
				require.Equal(t, ptr("c2"), l.NextCursor)
			},
		},
		{
			name: "list sessions last page",
			stub: func(t *testing.T, f *fakeService) {
				f.ListSessionsFunc = func(_ context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
					require.Equal(t, hxruntime.SessionListParams{}, p)
					return hxruntime.Page[hxruntime.Session]{}, nil
				}
			},
			req:    request{method: "GET", path: "/sessions"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"items":[],"next_cursor":null}`, string(body))
			},
		},
		{
			name: "get session",
			stub: func(t *testing.T, f *fakeService) {
				f.GetSessionFunc = func(_ context.Context, id string) (*hxruntime.Session, error) {
					require.Equal(t, "s1", id)
					return sessionFixture(), nil
				}
			},
			req:    request{method: "GET", path: "/sessions/s1"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.Equal(t, "s1", decode[api.Session](t, body).SessionId)
			},
		},
		{
			name: "submit run",
			stub: func(t *testing.T, f *fakeService) {
				f.SubmitRunFunc = func(_ context.Context, p hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
					require.Equal(t, "s1", p.SessionID)
					require.JSONEq(t, `"hello"`, string(p.Message))
					require.Empty(t, p.RequestID)
					return runFixture(hxruntime.StatusRunning), true, nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/runs", body: `{"message":"hello"}`},
			status: 202,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"session_id":"s1","run_id":"r1","output":null,"status":"running","stop_reason":null,
					"usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},
					"error":null,"pending":[],"usage_incomplete":false,
					"created_at":"2025-01-02T03:04:05Z","updated_at":"2025-01-02T03:04:06Z"}`, string(body))
			},
		},
		{
			name: "list runs",
			stub: func(t *testing.T, f *fakeService) {
				f.ListRunsFunc = func(_ context.Context, sid string, p hxruntime.ListParams) (hxruntime.Page[hxruntime.RunResult], error) {
					require.Equal(t, "s1", sid)
					require.Equal(t, 2, p.Limit)
					return hxruntime.Page[hxruntime.RunResult]{Items: []hxruntime.RunResult{
						*runFixture(hxruntime.StatusCompleted), *runFixture(hxruntime.StatusFailed),
					}}, nil
				}
			},
			req:    request{method: "GET", path: "/sessions/s1/runs?limit=2"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				l := decode[api.RunList](t, body)
				require.Len(t, l.Items, 2)
				require.Nil(t, l.NextCursor)
				require.Equal(t, &api.RunError{Type: "ProviderError", Message: "model call failed"}, l.Items[1].Error)
			},
		},
		{
			name: "get run awaiting input",
			stub: func(t *testing.T, f *fakeService) {
				f.GetRunFunc = func(_ context.Context, id string) (*hxruntime.RunResult, error) {
					require.Equal(t, "r1", id)
					return runFixture(hxruntime.StatusAwaitingInput), nil
				}
			},
			req:    request{method: "GET", path: "/runs/r1"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				r := decode[map[string]any](t, body)
				require.Equal(t, "awaiting_input", r["status"])
				pending, _ := json.Marshal(r["pending"])
				require.JSONEq(t, `[{"call":{"id":"call_1","name":"refund","input":{"amount":10}},"status":"approval",
					"attempt":0,"execution_key":"r1:1:call_1","policy":"manual","concurrent":false,"timeout_seconds":300,
					"retry":{"attempts":3,"backoff_seconds":0.5,"max_backoff_seconds":30,"retry_error_results":false}}]`, string(pending))
			},
		},
		{
			name: "pause",
			stub: func(t *testing.T, f *fakeService) {
				f.PauseFunc = func(_ context.Context, sid string) (*hxruntime.RunResult, error) {
					require.Equal(t, "s1", sid)
					return runFixture(hxruntime.StatusPaused), nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/pause"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				c := decode[api.ControlResult](t, body)
				require.NotNil(t, c.Run)
				require.Equal(t, api.RunStatusPaused, c.Run.Status)
			},
		},
		{
			name: "cancel without a run",
			stub: func(_ *testing.T, f *fakeService) {
				f.CancelFunc = func(context.Context, string) (*hxruntime.RunResult, error) { return nil, nil }
			},
			req:    request{method: "POST", path: "/sessions/s1/cancel"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"run":null}`, string(body))
			},
		},
		{
			name: "resume with recording",
			stub: func(t *testing.T, f *fakeService) {
				f.ResumeFunc = func(_ context.Context, sid string, p hxruntime.ResumeParams) (string, error) {
					require.Equal(t, "s1", sid)
					require.Equal(t, ptr(true), p.Recording)
					return "r1", nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/resume", body: `{"recording":true}`},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"run_id":"r1"}`, string(body))
			},
		},
		{
			name: "resume without body and nothing to resume",
			stub: func(t *testing.T, f *fakeService) {
				f.ResumeFunc = func(_ context.Context, _ string, p hxruntime.ResumeParams) (string, error) {
					require.Nil(t, p.Recording)
					return "", nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/resume"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.JSONEq(t, `{"run_id":null}`, string(body))
			},
		},
		{
			name: "pending",
			stub: func(_ *testing.T, f *fakeService) {
				f.PendingFunc = func(context.Context, string) ([]hxruntime.PendingTool, error) {
					return []hxruntime.PendingTool{pendingFixture()}, nil
				}
			},
			req:    request{method: "GET", path: "/sessions/s1/pending"},
			status: 200,
			check: func(t *testing.T, body []byte) {
				l := decode[api.PendingList](t, body)
				require.Len(t, l.Items, 1)
				require.Equal(t, "r1:1:call_1", l.Items[0].ExecutionKey)
				require.JSONEq(t, `{"amount":10}`, string(l.Items[0].Call.Input))
			},
		},
		{
			name: "approve",
			stub: func(t *testing.T, f *fakeService) {
				f.ApproveFunc = func(_ context.Context, p hxruntime.ApproveParams) (*hxruntime.RunResult, error) {
					require.Equal(t, hxruntime.ApproveParams{SessionID: "s1", ExecutionKey: "r1:1:call_1", Allow: true, Resume: true}, p)
					return runFixture(hxruntime.StatusCompleted), nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/tools/r1:1:call_1/approve", body: `{"allow":true,"resume":true}`},
			status: 200,
			check: func(t *testing.T, body []byte) {
				require.Equal(t, api.RunStatusCompleted, decode[api.RunResult](t, body).Status)
			},
		},
		{
			name: "resolve with result",
			stub: func(t *testing.T, f *fakeService) {
				f.ResolveFunc = func(_ context.Context, p hxruntime.ResolveParams) (*hxruntime.RunResult, error) {
					require.Equal(t, "s1", p.SessionID)
					require.Equal(t, "r1:1:call_1", p.ExecutionKey)
					require.NotNil(t, p.Result)
					require.Equal(t, "call_1", p.Result.ToolCallID)
					require.JSONEq(t, `{"refunded":10.0}`, string(p.Result.Content))
					require.True(t, p.Result.IsError)
					require.False(t, p.Retry || p.Abort || p.Resume)
					return runFixture(hxruntime.StatusAwaitingInput), nil
				}
			},
			req: request{method: "POST", path: "/sessions/s1/tools/r1%3A1%3Acall_1/resolve",
				body: `{"result":{"tool_call_id":"call_1","content":{"refunded":10.0},"is_error":true}}`},
			status: 200,
		},
		{
			name: "resolve retry",
			stub: func(t *testing.T, f *fakeService) {
				f.ResolveFunc = func(_ context.Context, p hxruntime.ResolveParams) (*hxruntime.RunResult, error) {
					require.Equal(t, hxruntime.ResolveParams{SessionID: "s1", ExecutionKey: "k", Retry: true, Resume: true}, p)
					return runFixture(hxruntime.StatusCompleted), nil
				}
			},
			req:    request{method: "POST", path: "/sessions/s1/tools/k/resolve", body: `{"retry":true,"abort":false,"resume":true}`},
			status: 200,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			if tt.stub != nil {
				tt.stub(t, tb.svc)
			}
			resp, body := tb.do(t, tt.req)
			require.Equal(t, tt.status, resp.StatusCode, "body: %s", body)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.NotEmpty(t, resp.Header.Get("X-Request-ID"))
			if tt.check != nil {
				tt.check(t, body)
			}
		})
	}
}

func TestSubmitRunIdempotencyAndWait(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name          string
		path          string
		body          string
		header        map[string]string
		created       bool
		wantRequestID string
		wantWait      time.Duration // 0: WaitRun must not be called
		status        int
		wantStatus    api.RunStatus
	}{
		{name: "new run", body: `{"message":"hi"}`, created: true, status: 202, wantStatus: api.RunStatusRunning},
		{name: "same request id returns existing run", body: `{"message":"hi","request_id":"req-1"}`,
			wantRequestID: "req-1", status: 200, wantStatus: api.RunStatusRunning},
		{name: "idempotency key header", body: `{"message":"hi"}`, header: map[string]string{"Idempotency-Key": "key-1"},
			created: true, wantRequestID: "key-1", status: 202, wantStatus: api.RunStatusRunning},
		{name: "header and body agree", body: `{"message":"hi","request_id":"key-1"}`,
			header: map[string]string{"Idempotency-Key": "key-1"}, created: true, wantRequestID: "key-1", status: 202,
			wantStatus: api.RunStatusRunning},
		{name: "wait returns the finished run", path: "?wait=30", body: `{"message":"hi"}`, created: true,
			wantWait: 30 * time.Second, status: 202, wantStatus: api.RunStatusCompleted},
		{name: "wait=0 answers at once", path: "?wait=0", body: `{"message":"hi"}`, created: true, status: 202,
			wantStatus: api.RunStatusRunning},
		{name: "content blocks pass through byte for byte",
			body:    `{"message":[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"c1","content":1.0}]}`,
			created: true, status: 202, wantStatus: api.RunStatusRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			var message json.RawMessage
			tb.svc.SubmitRunFunc = func(_ context.Context, p hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
				require.Equal(t, tt.wantRequestID, p.RequestID)
				message = p.Message
				return runFixture(hxruntime.StatusRunning), tt.created, nil
			}
			tb.svc.WaitRunFunc = func(_ context.Context, runID string, d time.Duration) (*hxruntime.RunResult, error) {
				require.NotZero(t, tt.wantWait, "WaitRun called without wait")
				require.Equal(t, "r1", runID)
				require.Equal(t, tt.wantWait, d)
				return runFixture(hxruntime.StatusCompleted), nil
			}
			resp, body := tb.do(t, request{method: "POST", path: "/sessions/s1/runs" + tt.path, body: tt.body, header: tt.header})
			require.Equal(t, tt.status, resp.StatusCode, "body: %s", body)
			require.Equal(t, tt.wantStatus, decode[api.RunResult](t, body).Status)
			var sent struct{ Message json.RawMessage }
			require.NoError(t, json.Unmarshal([]byte(tt.body), &sent))
			require.Equal(t, string(sent.Message), string(message))
		})
	}
}

func TestRequestIDHeader(t *testing.T) {
	t.Parallel()
	tb := setup(t)

	resp, _ := tb.do(t, request{method: "GET", path: "/healthz", header: map[string]string{"X-Request-ID": "abc-123"}})
	require.Equal(t, "abc-123", resp.Header.Get("X-Request-ID"))

	resp, _ = tb.do(t, request{method: "GET", path: "/healthz", header: map[string]string{"X-Request-ID": "bad id with spaces"}})
	require.NotEqual(t, "bad id with spaces", resp.Header.Get("X-Request-ID"))
	require.NotEmpty(t, resp.Header.Get("X-Request-ID"))

	// The access log names the request without its body or headers.
	// (It is written after the response, so wait for it.)
	require.Eventually(t, func() bool {
		return len(tb.logs.matching(`"msg":"http request"`, `"request_id":"abc-123"`, `"http_status":200`, `"operation":"getHealth"`)) == 1
	}, 5*time.Second, 10*time.Millisecond)
}

func TestPrincipalIsLocal(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.svc.GetSessionFunc = func(ctx context.Context, _ string) (*hxruntime.Session, error) {
		require.Equal(t, hxruntime.LocalPrincipal, hxruntime.PrincipalFrom(ctx))
		return sessionFixture(), nil
	}
	resp, _ := tb.do(t, request{method: "GET", path: "/sessions/s1", header: map[string]string{"Authorization": "Bearer x"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
