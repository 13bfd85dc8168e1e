// Command stdioserver is an MCP server over stdio written with the go-sdk,
// built from testdata by the mcp package's tests (TestStdioBinaryFromTestdata)
// as a separate program, the way teams ship their servers. Its one tool,
// stamp, answers with its input text and the execution key it got in
// _meta ("hxd/execution_key").
package main

import (
	"context"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type stampInput struct {
	Text string `json:"text" jsonschema:"the text to stamp"`
}

func main() {
	s := sdk.NewServer(&sdk.Implementation{Name: "testdata-stdio", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "stamp", Description: "Stamp a text with the call's execution key."},
		func(_ context.Context, req *sdk.CallToolRequest, in stampInput) (*sdk.CallToolResult, any, error) {
			key, _ := req.Params.Meta["hxd/execution_key"].(string)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text + " @" + key}}}, nil, nil
		})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdioserver:", err)
		os.Exit(1)
	}
}
