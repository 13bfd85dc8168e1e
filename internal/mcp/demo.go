package mcp

import (
	"context"
	"errors"
	"io"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoInput is the input of both demo tools.
type demoInput struct {
	Text string `json:"text" jsonschema:"the text to work on"`
}

// wordCountOutput is word_count's structured result.
type wordCountOutput struct {
	Words int `json:"words"`
}

// NewDemoServer returns the tiny MCP server hxd ships (hxd
// mcp-demo-server) so that a newcomer sees an MCP tool without installing
// anything: word_count counts the words of a text, upper upper-cases it.
func NewDemoServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "hxd-demo", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "word_count", Description: "Count the words of a text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in demoInput) (*sdk.CallToolResult, wordCountOutput, error) {
			return nil, wordCountOutput{Words: len(strings.Fields(in.Text))}, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "upper", Description: "Upper-case a text."},
		func(_ context.Context, _ *sdk.CallToolRequest, in demoInput) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.ToUpper(in.Text)}}}, nil, nil
		})
	return s
}

// RunDemoServer serves the demo server over stdin and stdout (newline
// delimited JSON-RPC) until the client disconnects or ctx ends.
func RunDemoServer(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	t := &sdk.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	err := NewDemoServer().Run(ctx, t)
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// nopWriteCloser is a Writer whose Close does nothing.
type nopWriteCloser struct{ io.Writer }

// Close implements io.Closer.
func (nopWriteCloser) Close() error { return nil }
