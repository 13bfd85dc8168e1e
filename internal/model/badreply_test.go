package model

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// providerCase builds one provider against a local server speaking its
// wire format; both providers run every bad-reply case.
type providerCase struct {
	name  string
	setup func(t *testing.T, h http.HandlerFunc, mutate func(*Config)) Streamer
}

var providerCases = []providerCase{
	{name: "anthropic", setup: func(t *testing.T, h http.HandlerFunc, mutate func(*Config)) Streamer {
		return setupAnthropic(t, h, mutate).provider
	}},
	{name: "openai", setup: func(t *testing.T, h http.HandlerFunc, mutate func(*Config)) Streamer {
		return setupOpenAI(t, h, mutate).provider
	}},
}

// wire holds the bodies of one case in each provider's wire format.
type wire struct{ anthropic, openai http.HandlerFunc }

func (w wire) of(provider string) http.HandlerFunc {
	if provider == "anthropic" {
		return w.anthropic
	}
	return w.openai
}

// requireFailure asserts err is a *Failure of type typ and retryability.
func requireFailure(t *testing.T, err error, typ string, retryable bool) *Failure {
	t.Helper()
	var f *Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, typ, f.Type, "%v", err)
	require.Equal(t, retryable, f.Retryable, "%v", err)
	require.Equal(t, retryable, IsTransient(err))
	return f
}

// openaiUsageChunk is the last chunk of a stream with include_usage.
const openaiUsageChunk = `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":4,"total_tokens":15}}`

// argsSecret is in every bad tool-argument payload: it must never reach a
// failure message.
const argsSecret = "ARGS-PAYLOAD-MUST-NOT-LEAK"

// TestToolArgumentsNotJSON: tool arguments that do not assemble to a JSON
// object fail the attempt with a retryable ToolArgumentsError naming the tool
// and the call id, never the arguments, and carrying the usage reported
// before.
func TestToolArgumentsNotJSON(t *testing.T) {
	t.Parallel()
	anthropicTool := func(partials ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			body := evMessageStart + evBlockStart(0, `{"type":"text","text":""}`) +
				evDelta(0, `{"type":"text_delta","text":"Calling."}`) + evBlockStop(0) +
				evBlockStart(1, `{"type":"tool_use","id":"toolu_bad","name":"lookup","input":{}}`)
			for _, p := range partials {
				body += evDelta(1, fmt.Sprintf(`{"type":"input_json_delta","partial_json":%q}`, p))
			}
			stream(w, body+evBlockStop(1)+evMessageDelta("tool_use", 9)+evMessageStop)
		}
	}
	openaiTool := func(args ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			chunks := []string{chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_bad","type":"function","function":{"name":"lookup","arguments":""}}]}`, "")}
			for _, a := range args {
				chunks = append(chunks, chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}`, a), ""))
			}
			chunks = append(chunks, chunk(`{}`, "tool_calls"), openaiUsageChunk)
			sse(w, chunks...)
		}
	}
	tests := []struct {
		name string
		args []string
	}{
		{name: "not JSON", args: []string{`{"q": "` + argsSecret, `" tru`}},
		{name: "array", args: []string{`["` + argsSecret + `"]`}},
		{name: "string", args: []string{`"` + argsSecret + `"`}},
		{name: "repeated key", args: []string{`{"a":"` + argsSecret + `","a":2}`}},
		{name: "nested too deep", args: []string{deepArgs(200)}},
	}
	wantUsage := map[string]*Usage{
		"anthropic": {InputTokens: 25, OutputTokens: 9, CacheReadInputTokens: 3, CacheCreationInputTokens: 2},
		"openai":    {InputTokens: 11, OutputTokens: 4},
	}
	wantID := map[string]string{"anthropic": "toolu_bad", "openai": "call_bad"}
	for _, pc := range providerCases {
		for _, tt := range tests {
			t.Run(pc.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := wire{anthropic: anthropicTool(tt.args...), openai: openaiTool(tt.args...)}.of(pc.name)
				p := pc.setup(t, h, nil)
				resp, err := p.Complete(t.Context(), hi())
				require.Nil(t, resp)
				f := requireFailure(t, err, FailureToolArguments, true)
				require.Equal(t, fmt.Sprintf(`model reply: tool call "lookup" (id %q) has arguments that are not a JSON object`, wantID[pc.name]), f.Message)
				require.NotContains(t, err.Error(), argsSecret)
				if pc.name == "anthropic" {
					// The failure comes at content_block_stop, before
					// message_delta: usage as of message_start.
					require.Equal(t, &Usage{InputTokens: 25, OutputTokens: 1, CacheReadInputTokens: 3, CacheCreationInputTokens: 2}, f.Usage)
				} else {
					require.Equal(t, wantUsage[pc.name], f.Usage)
				}
			})
		}
	}
}

// TestToolArgumentsMessageBounded: a model-chosen tool name is cut in the
// failure message.
func TestToolArgumentsMessageBounded(t *testing.T) {
	t.Parallel()
	f := toolArgumentsFailure(strings.Repeat("é", 100), "id\n1")
	require.Equal(t, `model reply: tool call "`+strings.Repeat("é", 32)+`…" (id "id\n1") has arguments that are not a JSON object`, f.Message)
}

// TestAnthropicCompleteStreamDeltas: text and thinking pieces reach onDelta
// in order (signature, input_json and redacted blocks do not), and their
// concatenations are the reply's Text and Thinking.
func TestAnthropicCompleteStreamDeltas(t *testing.T) {
	t.Parallel()
	b := setupAnthropic(t, func(w http.ResponseWriter, _ *http.Request) {
		stream(w, thinkingStream)
	}, func(c *Config) { c.Thinking = &Thinking{BudgetTokens: 1024} })
	var got []Delta
	resp, err := b.provider.CompleteStream(t.Context(), hi(), func(d Delta) { got = append(got, d) })
	require.NoError(t, err)
	require.Equal(t, []Delta{
		{DeltaThinking, "I should look"}, {DeltaThinking, " it up."}, {DeltaText, "Let me check."},
	}, got)
	require.Equal(t, "I should look it up.", resp.Thinking)
	require.Equal(t, "Let me check.", resp.Text)

	// Complete is CompleteStream without a hook: the same reply.
	plain, err := b.provider.Complete(t.Context(), hi())
	require.NoError(t, err)
	require.Equal(t, resp, plain)
}

// cutStream writes body as an event stream, flushes it and closes the
// connection without ending the chunked body.
func cutStream(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// TestPartialUsageOnFailure: a call that fails after the provider reported
// usage carries it in Failure.Usage; one that fails before carries none.
func TestPartialUsageOnFailure(t *testing.T) {
	t.Parallel()
	started := evMessageStart + evBlockStart(0, `{"type":"text","text":""}`) + evDelta(0, `{"type":"text_delta","text":"Hel"}`)
	atStart := &Usage{InputTokens: 25, OutputTokens: 1, CacheReadInputTokens: 3, CacheCreationInputTokens: 2}
	tests := []struct {
		name      string
		provider  string
		handler   http.HandlerFunc
		wantType  string
		wantUsage *Usage
		wantText  string
	}{
		{name: "connection cut after message_start", provider: "anthropic", handler: cutStream(started),
			wantType: FailureConnection, wantUsage: atStart, wantText: "Hel"},
		{name: "overloaded_error after message_start", provider: "anthropic",
			handler:  func(w http.ResponseWriter, _ *http.Request) { stream(w, started+evError("overloaded_error")) },
			wantType: FailureAPIStatus, wantUsage: atStart, wantText: "Hel"},
		{name: "no message_stop after message_delta", provider: "anthropic",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, started+evBlockStop(0)+sseEvent("message_delta",
					`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":30,"output_tokens":7,"cache_read_input_tokens":5}}`))
			},
			wantType: FailureConnection, wantUsage: &Usage{InputTokens: 30, OutputTokens: 7, CacheReadInputTokens: 5, CacheCreationInputTokens: 2}, wantText: "Hel"},
		{name: "error before message_start", provider: "anthropic",
			handler:  func(w http.ResponseWriter, _ *http.Request) { stream(w, evError("api_error")) },
			wantType: FailureAPIStatus},
		{name: "529 status", provider: "anthropic",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				reply(w, 529, `{"type":"error","error":{"type":"overloaded_error","message":"x"}}`)
			},
			wantType: FailureAPIStatus},
		{name: "connection cut after the usage chunk", provider: "openai",
			handler:  cutAfter(chunk(`{"role":"assistant","content":"Hel"}`, ""), openaiUsageChunk),
			wantType: FailureConnection, wantUsage: &Usage{InputTokens: 11, OutputTokens: 4}, wantText: "Hel"},
		{name: "usage chunk but no finish_reason", provider: "openai",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				sse(w, chunk(`{"role":"assistant","content":"Hel"}`, ""), openaiUsageChunk)
			},
			wantType: FailureConnection, wantUsage: &Usage{InputTokens: 11, OutputTokens: 4}, wantText: "Hel"},
		{name: "connection cut before usage", provider: "openai",
			handler:  cutAfter(chunk(`{"role":"assistant","content":"Hel"}`, "")),
			wantType: FailureConnection, wantText: "Hel"},
	}
	for _, tt := range tests {
		t.Run(tt.provider+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			var p Streamer
			for _, pc := range providerCases {
				if pc.name == tt.provider {
					p = pc.setup(t, tt.handler, nil)
				}
			}
			var text strings.Builder
			resp, err := p.CompleteStream(t.Context(), hi(), func(d Delta) { text.WriteString(d.Text) })
			require.Nil(t, resp)
			f := requireFailure(t, err, tt.wantType, true)
			require.Equal(t, tt.wantUsage, f.Usage)
			require.Equal(t, tt.wantText, text.String(), "deltas before the failure were delivered")
		})
	}
}

// TestStreamNeverEnds: an event stream that keeps sending keep-alives (or
// nothing) but never an answer is ended by the per-call timeout, a
// retryable TimeoutError.
func TestStreamNeverEnds(t *testing.T) {
	t.Parallel()
	keepAlive := func(first, beat string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, first)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-tick.C:
					if beat == "" {
						continue
					}
					if _, err := io.WriteString(w, beat); err != nil {
						return
					}
					if err := rc.Flush(); err != nil {
						return
					}
				}
			}
		}
	}
	tests := []struct {
		name    string
		handler wire
	}{
		{name: "pings", handler: wire{
			anthropic: keepAlive(evMessageStart, evPing),
			openai:    keepAlive("data: "+chunk(`{"role":"assistant","content":"Hel"}`, "")+"\n\n", ": keep-alive\n\n"),
		}},
		{name: "nothing", handler: wire{
			anthropic: keepAlive(evMessageStart, ""),
			openai:    keepAlive("", ""),
		}},
	}
	for _, pc := range providerCases {
		for _, tt := range tests {
			t.Run(pc.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				p := pc.setup(t, tt.handler.of(pc.name), func(c *Config) { c.TimeoutSeconds = 0.3 })
				resp, err := p.Complete(t.Context(), hi())
				require.Nil(t, resp)
				f := requireFailure(t, err, FailureTimeout, true)
				require.Contains(t, f.Message, "call timeout of 300ms")
			})
		}
	}
}

// TestMalformedStream: garbage lines and an event whose data is not JSON
// fail the attempt as a non-retryable APIResponseValidationError.
func TestMalformedStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler wire
	}{
		{name: "garbage lines then data not JSON", handler: wire{
			anthropic: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, evMessageStart+"<html>garbage\n}{\n\n"+sseEvent("content_block_start", "not json at all")+evMessageStop)
			},
			openai: func(w http.ResponseWriter, _ *http.Request) {
				sse(w, chunk(`{"role":"assistant","content":"Hel"}`, "")+"\n<html>garbage\n}{", "not json at all")
			},
		}},
		{name: "error event whose data is not JSON", handler: wire{
			anthropic: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, evMessageStart+sseEvent("error", "overloaded "+testAnthropicKey))
			},
			openai: func(w http.ResponseWriter, _ *http.Request) {
				sse(w, chunk(`{"role":"assistant","content":"Hel"}`, ""), `{"error": overloaded `+testKey)
			},
		}},
		{name: "an HTML page sent as an event stream", handler: wire{
			anthropic: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, "<html>\n<body>upstream garbage</body>\n</html>\n")
			},
			openai: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "<html>\n<body>upstream garbage</body>\n</html>\n")
			},
		}},
		{name: "garbage lines in a stream that never completes", handler: wire{
			anthropic: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, evMessageStart+"}{ garbage\n\n"+evBlockStart(0, `{"type":"text","text":""}`))
			},
			openai: func(w http.ResponseWriter, _ *http.Request) {
				sse(w, chunk(`{"role":"assistant","content":"Hel"}`, "")+"\n}{ garbage")
			},
		}},
		{name: "truncated JSON event", handler: wire{
			anthropic: func(w http.ResponseWriter, _ *http.Request) {
				stream(w, evMessageStart+sseEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x`)+evMessageStop)
			},
			openai: func(w http.ResponseWriter, _ *http.Request) {
				sse(w, `{"choices":[{"index":0,"delta":{"content":"x`)
			},
		}},
	}
	for _, pc := range providerCases {
		for _, tt := range tests {
			t.Run(pc.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				p := pc.setup(t, tt.handler.of(pc.name), nil)
				resp, err := p.Complete(t.Context(), hi())
				require.Nil(t, resp)
				_ = requireFailure(t, err, FailureResponseValidation, false)
				require.NotContains(t, err.Error(), testAnthropicKey)
				require.NotContains(t, err.Error(), testKey)
				require.NotContains(t, err.Error(), "garbage")
			})
		}
	}
}

// TestReplyTooLargeBounded: a 2xx stream over MaxReplyBytes, whether many
// events or one endless event line, fails as a non-retryable
// APIResponseValidationError while it is read: the client stops reading
// soon after the bound.
func TestReplyTooLargeBounded(t *testing.T) {
	t.Parallel()
	flood := func(head, unit string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, head)
			var sent int64
			for sent < 3*MaxReplyBytes {
				n, err := io.WriteString(w, unit)
				sent += int64(n)
				if err != nil {
					return
				}
			}
		}
	}
	big := strings.Repeat("x", 1<<20)
	tests := []struct {
		name    string
		handler wire
	}{
		{name: "many events", handler: wire{
			anthropic: flood(evMessageStart+evBlockStart(0, `{"type":"text","text":""}`), evDelta(0, `{"type":"text_delta","text":"`+big+`"}`)),
			openai:    flood("", "data: "+chunk(`{"content":"`+big+`"}`, "")+"\n\n"),
		}},
		{name: "one endless line", handler: wire{
			anthropic: flood(evMessageStart+"event: content_block_delta\ndata: ", big),
			openai:    flood("data: ", big),
		}},
	}
	for _, pc := range providerCases {
		for _, tt := range tests {
			t.Run(pc.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				var served atomic.Int64
				h := tt.handler.of(pc.name)
				counted := func(w http.ResponseWriter, r *http.Request) {
					h(countingWriter{ResponseWriter: w, n: &served}, r)
				}
				p := pc.setup(t, counted, nil)
				resp, err := p.Complete(t.Context(), hi())
				require.Nil(t, resp)
				f := requireFailure(t, err, FailureResponseValidation, false)
				if tt.name == "many events" {
					require.Equal(t, "model server reply exceeds 33554432 bytes", f.Message)
				}
				require.Less(t, served.Load(), int64(2*MaxReplyBytes), "the reply was read past the bound")
			})
		}
	}
}

// countingWriter counts the bytes a handler wrote.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (c countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// TestFailuresNeverHoldTheKey: for every failure class the providers
// produce, the API key read through api_key_env appears in no Failure
// message nor error string, even when the server echoes it.
func TestFailuresNeverHoldTheKey(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"anthropic": testAnthropicKey, "openai": testKey}
	for _, pc := range providerCases {
		key := keys[pc.name]
		echo := func(status int) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "1")
				reply(w, status, `{"type":"error","error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Incorrect API key provided: `+key+`"}}`)
			}
		}
		tests := []struct {
			name     string
			handler  http.HandlerFunc
			wantType string
		}{
			{name: "401 echoing the key", handler: echo(401), wantType: FailureAuthentication},
			{name: "403 echoing the key", handler: echo(403), wantType: FailureAuthentication},
			{name: "400 echoing the key", handler: echo(400), wantType: FailureBadRequest},
			{name: "429 echoing the key", handler: echo(429), wantType: FailureRateLimit},
			{name: "500 echoing the key", handler: echo(500), wantType: FailureAPIStatus},
			{name: "529 echoing the key", handler: echo(529), wantType: FailureAPIStatus},
			{name: "html 502 echoing the key", handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(502)
				_, _ = io.WriteString(w, "<html>"+key+"</html>")
			}, wantType: FailureAPIStatus},
			{name: "in-stream error echoing the key", handler: wire{
				anthropic: func(w http.ResponseWriter, _ *http.Request) {
					stream(w, evMessageStart+sseEvent("error", `{"type":"error","error":{"type":"overloaded_error","message":"`+key+`"}}`))
				},
				openai: func(w http.ResponseWriter, _ *http.Request) {
					sse(w, chunk(`{"role":"assistant","content":"x"}`, ""), `{"error":{"type":"server_error","message":"`+key+`"}}`)
				},
			}.of(pc.name), wantType: FailureAPIStatus},
			{name: "error data not JSON echoing the key", handler: wire{
				anthropic: func(w http.ResponseWriter, _ *http.Request) { stream(w, evMessageStart+sseEvent("error", key)) },
				openai: func(w http.ResponseWriter, _ *http.Request) {
					sse(w, chunk(`{"role":"assistant","content":"x"}`, ""), `{"error": `+key)
				},
			}.of(pc.name), wantType: FailureResponseValidation},
			{name: "event data not JSON echoing the key", handler: wire{
				anthropic: func(w http.ResponseWriter, _ *http.Request) {
					stream(w, evMessageStart+sseEvent("content_block_start", key))
				},
				openai: func(w http.ResponseWriter, _ *http.Request) { sse(w, key) },
			}.of(pc.name), wantType: FailureResponseValidation},
			{name: "tool arguments holding the key", handler: wire{
				anthropic: func(w http.ResponseWriter, _ *http.Request) {
					stream(w, evMessageStart+evBlockStart(0, `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`)+
						evDelta(0, `{"type":"input_json_delta","partial_json":"`+key+`"}`)+evBlockStop(0)+evMessageStop)
				},
				openai: func(w http.ResponseWriter, _ *http.Request) {
					sse(w, chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"`+key+`"}}]}`, "tool_calls"))
				},
			}.of(pc.name), wantType: FailureToolArguments},
			{name: "connection cut", handler: wire{
				anthropic: cutStream(evMessageStart),
				openai:    cutAfter(chunk(`{"role":"assistant","content":"x"}`, "")),
			}.of(pc.name), wantType: FailureConnection},
			{name: "timeout", handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_ = http.NewResponseController(w).Flush()
				<-r.Context().Done()
			}, wantType: FailureTimeout},
		}
		for _, tt := range tests {
			t.Run(pc.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				// Only the timeout case waits for the call timeout; the
				// others get a generous one, so a loaded machine does not
				// turn their answer into a timeout.
				timeout := 30.0
				if tt.wantType == FailureTimeout {
					timeout = 0.2
				}
				p := pc.setup(t, tt.handler, func(c *Config) { c.TimeoutSeconds = timeout })
				_, err := p.Complete(t.Context(), hi())
				var f *Failure
				require.ErrorAs(t, err, &f)
				require.Equal(t, tt.wantType, f.Type, "%v", err)
				for _, s := range []string{f.Message, f.Error(), err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", *f)} {
					require.NotContains(t, s, key)
				}
			})
		}
	}
}

// TestStopReasonMapping: each provider's stop reasons, sent over its wire
// format, map to hxd's stop_reason values as documented on the provider
// types (the table in the contract).
func TestStopReasonMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		provider string
		reason   string // as the provider sends it; "" for none
		tools    bool
		want     string
	}{
		{"anthropic", "end_turn", false, "end_turn"},
		{"anthropic", "tool_use", true, "tool_use"},
		{"anthropic", "max_tokens", false, "max_tokens"},
		{"anthropic", "stop_sequence", false, "stop_sequence"},
		{"anthropic", "pause_turn", false, "pause_turn"},
		{"anthropic", "refusal", false, "refusal"},
		{"anthropic", "", false, "end_turn"},
		{"anthropic", "", true, "tool_use"},
		{"openai", "stop", false, "end_turn"},
		{"openai", "stop", true, "tool_use"},
		{"openai", "tool_calls", true, "tool_use"},
		{"openai", "function_call", true, "tool_use"},
		{"openai", "length", false, "max_tokens"},
		{"openai", "content_filter", false, "refusal"},
		{"openai", "insufficient_system_resource", false, "insufficient_system_resource"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/tools=%v", tt.provider, tt.reason, tt.tools), func(t *testing.T) {
			t.Parallel()
			h := func(w http.ResponseWriter, _ *http.Request) {
				if tt.provider == "anthropic" {
					body := evMessageStart + evBlockStart(0, `{"type":"text","text":""}`) +
						evDelta(0, `{"type":"text_delta","text":"x"}`) + evBlockStop(0)
					if tt.tools {
						body += evBlockStart(1, `{"type":"tool_use","id":"toolu_1","name":"f","input":{}}`) + evBlockStop(1)
					}
					delta := `{"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"output_tokens":1}}`
					if tt.reason != "" {
						delta = fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":1}}`, tt.reason)
					}
					stream(w, body+sseEvent("message_delta", delta)+evMessageStop)
					return
				}
				first := chunk(`{"role":"assistant","content":"x"}`, "")
				if tt.tools {
					first = chunk(`{"role":"assistant","content":"x","tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "")
				}
				sse(w, first, chunk(`{}`, tt.reason))
			}
			var p Streamer
			for _, pc := range providerCases {
				if pc.name == tt.provider {
					p = pc.setup(t, h, nil)
				}
			}
			resp, err := p.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, tt.want, resp.StopReason)
			require.Equal(t, tt.tools, len(resp.ToolCalls) > 0)
		})
	}
}

// TestStrayLinesInACompleteStream: lines that are no SSE field are skipped,
// as the SSE rules say, when the answer completes.
func TestStrayLinesInACompleteStream(t *testing.T) {
	t.Parallel()
	h := wire{
		anthropic: func(w http.ResponseWriter, _ *http.Request) {
			stream(w, "stray line\n\n"+textStream("Hello.", "end_turn"))
		},
		openai: func(w http.ResponseWriter, _ *http.Request) {
			sse(w, chunk(`{"role":"assistant","content":"Hello."}`, "")+"\nstray line", chunk(`{}`, "stop"))
		},
	}
	for _, pc := range providerCases {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			p := pc.setup(t, h.of(pc.name), nil)
			resp, err := p.Complete(t.Context(), hi())
			require.NoError(t, err)
			require.Equal(t, "Hello.", resp.Text)
		})
	}
}

func TestSSELines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		chunks  []string
		foreign bool
	}{
		{name: "events", chunks: []string{"event: ping\ndata: {}\n\n", "id: 1\nretry: 5\n: comment\n\n"}},
		{name: "crlf", chunks: []string{"data: {}\r\n\r\n"}},
		{name: "field without colon", chunks: []string{"data\nevent\n\n"}},
		{name: "split across reads", chunks: []string{"ev", "ent", ": x\nda", "ta:", " y\n\n"}},
		{name: "long data line", chunks: []string{"data: " + strings.Repeat("x", 100) + "\n"}},
		{name: "html", chunks: []string{"<html>\n"}, foreign: true},
		{name: "unknown field", chunks: []string{"foo: bar\n"}, foreign: true},
		{name: "long first word", chunks: []string{"dataxx: y\n"}, foreign: true},
		{name: "word split across reads", chunks: []string{"da", "tum\n"}, foreign: true},
		{name: "garbage after events", chunks: []string{"data: {}\n\n}{\n"}, foreign: true},
		{name: "unfinished last line", chunks: []string{"data: {}\n\ngarb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var l sseLines
			for _, c := range tt.chunks {
				l.write([]byte(c))
			}
			require.Equal(t, tt.foreign, l.foreign)
		})
	}
}
