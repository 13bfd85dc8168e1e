package runtime_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/agent"
	"hxd/internal/model"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/tool"
)

// blocks decodes a JSON array of content blocks (opaque ones keep Raw).
func blocks(t *testing.T, s string) []model.ContentBlock {
	t.Helper()
	var out []model.ContentBlock
	require.NoError(t, json.Unmarshal([]byte(s), &out))
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

const nativeBlocks = `[` +
	`{"type":"thinking","thinking":"look it up","signature":"sig-1"},` +
	`{"type":"redacted_thinking","data":"ZW5jcnlwdGVk"},` +
	`{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"q":"acme"},"extra":[1,2]},` +
	`{"type":"text","text":"Checking."},` +
	`{"type":"tool_use","id":"c1","name":"count","input":{"n":1}}]`

// TestAssistantMessageOfResponse: prepare_tools and finish append the
// response's native blocks verbatim and in order when it has them (so the
// next call sends them back), and the text/tool_use blocks built from
// Text and ToolCalls otherwise.
func TestAssistantMessageOfResponse(t *testing.T) {
	t.Parallel()
	call := model.ToolCall{ID: "c1", Name: "count", Input: json.RawMessage(`{"n":1}`)}
	for _, tc := range []struct {
		name  string
		resp  model.Response
		phase hxruntime.Phase
		want  string // the appended assistant message's content
	}{
		{
			name:  "tools, native blocks",
			resp:  model.Response{Text: "Checking.", Thinking: "look it up", ToolCalls: []model.ToolCall{call}, Content: blocks(t, nativeBlocks)},
			phase: hxruntime.PhasePrepareTools,
			want:  nativeBlocks,
		},
		{
			name:  "tools, no native blocks",
			resp:  model.Response{Text: "Checking.", ToolCalls: []model.ToolCall{call, {ID: "c2", Name: "count"}}},
			phase: hxruntime.PhasePrepareTools,
			want:  `[{"type":"text","text":"Checking."},{"type":"tool_use","id":"c1","name":"count","input":{"n":1}},{"type":"tool_use","id":"c2","name":"count","input":{}}]`,
		},
		{
			name:  "tools, native tool_use without input",
			resp:  model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "count"}}, Content: blocks(t, `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"c1","name":"count"}]`)},
			phase: hxruntime.PhasePrepareTools,
			want:  `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"c1","name":"count","input":{}}]`,
		},
		{
			name:  "final, native blocks",
			resp:  model.Response{Text: "done", Content: blocks(t, `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"done"}]`)},
			phase: hxruntime.PhaseFinish,
			want:  `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"done"}]`,
		},
		{
			name:  "final, no native blocks",
			resp:  model.Response{Text: "done"},
			phase: hxruntime.PhaseFinish,
			want:  `[{"type":"text","text":"done"}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := tc.resp
			st := &hxruntime.RunState{RunID: "r", Iterations: 1, Phase: tc.phase, Status: hxruntime.StatusRunning, Response: &resp}
			if tc.phase == hxruntime.PhasePrepareTools {
				require.NoError(t, hxruntime.PrepareTools(st, func(string) (tool.Config, bool) { return tool.Config{}, false }))
				require.Len(t, st.Tools, len(resp.ToolCalls))
			} else {
				require.Equal(t, resp.Text, hxruntime.FinishRun(st))
			}
			require.Len(t, st.Messages, 1)
			require.Equal(t, model.RoleAssistant, st.Messages[0].Role)
			require.JSONEq(t, tc.want, mustJSON(t, st.Messages[0].Content))
			if tc.resp.Content != nil {
				// Byte for byte: the opaque block is its provider JSON.
				require.Equal(t, mustJSON(t, blocks(t, tc.want)), mustJSON(t, st.Messages[0].Content))
			}
		})
	}
}

// TestProcessResponseNativeBlocks: response middleware rewrites the text
// blocks of the native content (the processed text in the first text
// block's place) and leaves thinking, redacted and opaque blocks alone;
// without middleware the blocks are kept as they came.
func TestProcessResponseNativeBlocks(t *testing.T) {
	t.Parallel()
	suffix := " [checked]"
	two := `[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"a"},{"type":"future_block","x":1},{"type":"text","text":"b"}]`
	for _, tc := range []struct {
		name string
		mw   []agent.Middleware
		in   string
		text string
		want string
	}{
		{"no middleware", nil, two, "ab", two},
		{
			"append text", []agent.Middleware{{AppendText: &suffix}}, two, "ab",
			`[{"type":"thinking","thinking":"t","signature":"s"},{"type":"text","text":"ab [checked]"},{"type":"future_block","x":1}]`,
		},
		{
			"text removed", []agent.Middleware{{RegexReplace: &agent.RegexReplace{Pattern: ".*", Replace: ""}}},
			`[{"type":"redacted_thinking","data":"d"},{"type":"text","text":"a"}]`, "a",
			`[{"type":"redacted_thinking","data":"d"}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := model.Response{Text: tc.text, Content: blocks(t, tc.in)}
			def := &agent.Definition{ResponseMiddleware: tc.mw}
			got := hxruntime.ProcessResponse(def, &raw)
			require.Equal(t, mustJSON(t, blocks(t, tc.want)), mustJSON(t, got.Content))
			text := ""
			for _, b := range got.Content {
				if b.Type == model.BlockText {
					text += b.Text
				}
			}
			require.Equal(t, got.Text, text, "the processed blocks' text is the processed text")
			require.Equal(t, tc.in, mustJSON(t, raw.Content), "the raw response is not changed")
		})
	}
}

// TestCompletedPayloadKeepsReferenceShape: model.completed carries
// {text, thinking, tool_calls, stop_reason, usage} and never content.
func TestCompletedPayloadKeepsReferenceShape(t *testing.T) {
	t.Parallel()
	resp := model.Response{Text: "x", ToolCalls: []model.ToolCall{}, StopReason: "end_turn", Content: blocks(t, nativeBlocks)}
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(mustJSON(t, hxruntime.CompletedPayload(&resp))), &keys))
	got := make([]string, 0, len(keys))
	for k := range keys {
		got = append(got, k)
	}
	require.ElementsMatch(t, []string{"text", "thinking", "tool_calls", "stop_reason", "usage"}, got)
	require.NotNil(t, resp.Content, "the response itself keeps its blocks")
}
