package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"hxd/internal/tool"
)

func TestIsTransientResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		text    string
		isError bool
		want    bool
	}{
		{`{"error":"x","status":429}`, false, true},
		{`{"error":"x","status":503}`, true, true},
		{`{"status":500}`, false, true},
		{`{"code":502,"message":"bad"}`, false, true},
		{`{"error":{"code":429,"message":"slow down"}}`, false, true},
		{`{"error":{"status_code":504}}`, false, true},
		{`{"status_code":503}`, false, false}, // neither error, status nor code
		{`{"error":"x","status":404}`, false, false},
		{`{"error":"x","status":"503"}`, false, false}, // a string is no int
		{`{"error":"x","status":503.0}`, false, false}, // nor a float
		{`{"error":"x","status":99999999999999999999}`, false, true},
		{`{"error":"Rate limit exceeded"}`, false, true},
		{`{"error":{"message":"service unavailable"}}`, false, true},
		{`{"error":"not found"}`, true, false},
		{`{"error":null,"data":"rate limit"}`, true, false},
		{`{"result":"rate limit"}`, true, false},
		{"  Too Many Requests  ", true, true},
		{"Too Many Requests", false, false}, // text counts for error results only
		{"request timed out", true, true},
		{"no such file", true, false},
		{`{not json, rate limit`, true, true},
		{`[429]`, true, false},
		{"", true, false},
		{strings.Repeat("rate limit ", 200), true, false},    // over 2000 characters: real content
		{strings.Repeat("é", 1990) + " timeout", true, true}, // characters, not bytes
	}
	for _, c := range cases {
		require.Equal(t, c.want, isTransientResult(c.text, c.isError), "%q (isError %v)", c.text, c.isError)
	}
}

func TestMapResult(t *testing.T) {
	t.Parallel()
	res := &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: "first"},
			&sdk.TextContent{Text: `{"a":1}`},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///r.bin", Blob: []byte{0, 1, 2}}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///r.txt", Text: "hello"}},
			&sdk.ResourceLink{URI: "https://example.com/doc"},
		},
		IsError: true,
	}
	out, text := mapResult("c9", res)
	want := "first\n{\"a\":1}\n" +
		"[artifact 1: audio audio/wav, 4 bytes]\n" +
		"[artifact 2: resource file:///r.bin application/octet-stream, 3 bytes]\n" +
		"[artifact 3: resource file:///r.txt text/plain, 5 bytes]\n" +
		"[resource link: https://example.com/doc]"
	require.Equal(t, want, text)
	require.Equal(t, string(tool.TextContent(want)), string(out.Result.Content))
	require.True(t, out.Result.IsError)
	require.Equal(t, "c9", out.Result.ToolCallID)
	require.Equal(t, []tool.Artifact{
		{MediaType: "audio/wav", Data: []byte("RIFF")},
		{MediaType: "application/octet-stream", Data: []byte{0, 1, 2}},
		{MediaType: "text/plain", Data: []byte("hello")},
	}, out.Artifacts)

	// Structured content is the content when it can be stored.
	out, _ = mapResult("c1", &sdk.CallToolResult{StructuredContent: map[string]any{"b": []int{1, 2}}})
	require.JSONEq(t, `{"b":[1,2]}`, string(out.Result.Content))
	deep := any("x")
	for range 200 {
		deep = []any{deep}
	}
	out, _ = mapResult("c1", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "fallback"}}, StructuredContent: deep})
	require.Equal(t, `"fallback"`, string(out.Result.Content))
}
