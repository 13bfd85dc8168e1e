package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngBytes are the bytes the image tool returns.
var pngBytes = []byte("\x89PNG\r\n\x1a\nnot-really-an-image")

// objectSchema is the input schema of the test tools.
var objectSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"fifo":{"type":"string"}}}`)

// testCalls records what an in-process test server saw.
type testCalls struct {
	mu   sync.Mutex
	keys []string
}

// add records an execution key.
func (c *testCalls) add(key string) {
	c.mu.Lock()
	c.keys = append(c.keys, key)
	c.mu.Unlock()
}

// all returns the keys seen so far.
func (c *testCalls) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

// textResult returns a result holding one text block.
func textResult(s string, isError bool) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}, IsError: isError}
}

// newTestServer returns the test server: tools echo, meta, fail,
// throttle, image, structured, block, flood, big, env and pid. calls, if not
// nil, records the execution key of each call.
func newTestServer(calls *testCalls, opts ...func(*sdk.ServerOptions)) *sdk.Server {
	so := &sdk.ServerOptions{}
	for _, o := range opts {
		o(so)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "hxd-test", Version: "1"}, so)
	add := func(name, desc string, h func(ctx context.Context, args map[string]string) *sdk.CallToolResult) {
		s.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: objectSchema},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				key, _ := req.Params.Meta[MetaExecutionKey].(string)
				if calls != nil {
					calls.add(key)
				}
				args := map[string]string{"execution_key": key}
				_ = json.Unmarshal(req.Params.Arguments, &args)
				return h(ctx, args), nil
			})
	}
	add("echo", "Echo the text.", func(_ context.Context, a map[string]string) *sdk.CallToolResult {
		return textResult(a["text"], false)
	})
	add("meta", "Return the execution key.", func(_ context.Context, a map[string]string) *sdk.CallToolResult {
		return textResult(a["execution_key"], false)
	})
	add("fail", "Fail.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return textResult("the input is wrong", true)
	})
	add("throttle", "Report a throttled upstream.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return textResult(`{"error":"upstream said slow down","status":429}`, false)
	})
	add("image", "Return an image.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "a chart"},
			&sdk.ImageContent{MIMEType: "image/png", Data: pngBytes},
		}}
	})
	add("structured", "Return structured content.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"n":1}`}}, StructuredContent: map[string]any{"n": 1}}
	})
	add("block", "Block until cancelled; writes to the fifo first.", func(ctx context.Context, a map[string]string) *sdk.CallToolResult {
		if p := a["fifo"]; p != "" {
			if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
				_, _ = f.WriteString("started\n")
				_ = f.Close()
			}
		}
		<-ctx.Done()
		return textResult("cancelled", true)
	})
	add("flood", "Flood stdout with one endless JSON message, or with garbage.", func(_ context.Context, a map[string]string) *sdk.CallToolResult {
		if a["text"] == "garbage" {
			_, _ = os.Stdout.WriteString("this is not JSON-RPC\n")
			return textResult("garbage", false)
		}
		_, _ = os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 9 {
			if _, err := os.Stdout.Write(chunk); err != nil {
				break
			}
		}
		return textResult("flooded", false)
	})
	add("big", "Return a reply over MaxReplyBytes.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return textResult(strings.Repeat("y", MaxReplyBytes+1024), false)
	})
	add("env", "Return the environment.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return textResult(strings.Join(os.Environ(), "\n"), false)
	})
	add("pid", "Return the process id.", func(context.Context, map[string]string) *sdk.CallToolResult {
		return textResult(strconv.Itoa(os.Getpid()), false)
	})
	return s
}

// stdioTransport is the child's side of the stdio transport.
func stdioTransport() sdk.Transport { return &sdk.StdioTransport{} }

// httpServer is an in-process MCP server over HTTP.
type httpServer struct {
	server *sdk.Server
	calls  *testCalls
	url    string

	mu      sync.Mutex
	headers []http.Header
}

// seenHeaders returns the request headers seen so far.
func (h *httpServer) seenHeaders() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}

// startHTTPServer serves newTestServer over kind: "streamable" (the
// SDK's default, which negotiates the newest protocol), "stateful-2025"
// (streamable HTTP pinned to protocol 2025-11-25, with sessions) or "sse"
// (legacy SSE only).
func startHTTPServer(t *testing.T, kind string) *httpServer {
	t.Helper()
	h := &httpServer{calls: &testCalls{}}
	var opts []func(*sdk.ServerOptions)
	if kind == "stateful-2025" {
		opts = append(opts, func(o *sdk.ServerOptions) { o.SupportedProtocolVersions = []string{"2025-11-25"} })
	}
	h.server = newTestServer(h.calls, opts...)
	get := func(*http.Request) *sdk.Server { return h.server }
	var handler http.Handler
	if kind == "sse" {
		handler = sdk.NewSSEHandler(get, nil)
	} else {
		handler = sdk.NewStreamableHTTPHandler(get, nil)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/mcp"
	return h
}
