package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/model"
)

// openAIChunk is a chat.completion.chunk whose first choice has delta (a
// JSON object) and, when set, finish_reason.
func openAIChunk(delta, finish string) string {
	s := `{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":` + delta
	if finish != "" {
		s += `,"finish_reason":"` + finish + `"`
	}
	return s + `}]}`
}

// TestServeStreamLiveOpenAI: a streamed run of an OpenAI agent shows the
// answer's first piece on SSE while the provider is still answering. The
// chat-completions server sends the first piece, then holds the rest of
// the stream until the test has read that piece's text_delta frame from
// SSE: were deltas only written after the call, the test would wait
// forever and fail at its context deadline. The frames' concatenation is
// the output, and run_result comes last.
func TestServeStreamLiveOpenAI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pieces := []string{"Overdue ", "balance: ", "1500 ", "dollars."}
	answer := strings.Join(pieces, "")

	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		send := func(data string) {
			_, _ = io.WriteString(w, "data: "+data+"\n\n")
			_ = http.NewResponseController(w).Flush()
		}
		send(openAIChunk(`{"role":"assistant","content":""}`, ""))
		send(openAIChunk(`{"content":`+jsonText(pieces[0])+`}`, ""))
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		for _, piece := range pieces[1:] {
			send(openAIChunk(`{"content":`+jsonText(piece)+`}`, ""))
		}
		send(openAIChunk(`{}`, "stop"))
		send(`{"id":"chatcmpl-s","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":4,"total_tokens":11}}`)
		send("[DONE]")
	}))
	t.Cleanup(srv.Close)

	agentYAML := "name: live\nversion: v1\nmodel:\n  provider: openai\n  model: gpt-test\n  base_url: " + srv.URL + "/v1\n  api_key_env: HXD_TEST_OPENAI_KEY\n"
	d := startAgentsDaemon(t, filepath.Join(t.TempDir(), "hxd.db"), map[string]string{"live": agentYAML},
		map[string]string{"HXD_TEST_OPENAI_KEY": "sk-test-not-a-real-key"})

	resp, body := d.do(t, http.MethodPost, "/sessions", map[string]any{
		"agent": map[string]string{"name": "live", "version": "v1"}, "recording": true,
	})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	sid := decode(t, body)["session_id"].(string)
	resp, body = d.do(t, http.MethodPost, "/sessions/"+sid+"/runs", map[string]any{"message": "how much is overdue?", "stream": true})
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(body))
	rid := decode(t, body)["run_id"].(string)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/runs/"+rid+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	sse, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer hxtest.Close(t, sse.Body)
	require.Equal(t, http.StatusOK, sse.StatusCode)

	var deltas []string
	var last map[string]any
	br := bufio.NewReader(sse.Body)
	var event, data string
	for last == nil {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "SSE ended before run_result (deltas so far: %q)", deltas)
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(data), &ev))
			requireContractEvent(t, ev)
			switch event {
			case "text_delta":
				deltas = append(deltas, ev["data"].(string))
				if len(deltas) == 1 {
					require.Equal(t, pieces[0], deltas[0], "the first piece arrives on its own, before the provider sends the rest")
					close(release)
				}
			case "run_result":
				last = ev
			}
			event, data = "", ""
		}
	}
	require.Equal(t, answer, strings.Join(deltas, ""))
	require.Equal(t, answer, last["data"].(map[string]any)["output"])
}

// The OpenAI provider streams (the runtime streams through model.Streamer only).
var _ model.Streamer = (*model.OpenAI)(nil)

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
