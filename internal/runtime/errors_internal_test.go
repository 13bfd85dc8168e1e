package runtime

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/mcp"
)

// TestPublicWrap: the detail reports the cause, and both the sentinel and
// the cause stay in the chain (a caller can still branch on the cause).
func TestPublicWrap(t *testing.T) {
	cause := fmt.Errorf("%w: MCP tool %q: the agent declares no server %q", mcp.ErrBadTool, "mx_nope", "mx")
	for _, tc := range []struct {
		name, context, detail string
	}{
		{name: "with context", context: "the session's pinned MCP tools do not fit the agent",
			detail: `the session's pinned MCP tools do not fit the agent: mcp tool cannot be bridged: MCP tool "mx_nope": the agent declares no server "mx"`},
		{name: "cause alone", detail: `mcp tool cannot be bridged: MCP tool "mx_nope": the agent declares no server "mx"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := publicWrap(ErrAgentMismatch, tc.context, cause)
			require.ErrorIs(t, err, ErrAgentMismatch)
			require.ErrorIs(t, err, mcp.ErrBadTool)
			var pe *PublicError
			require.True(t, errors.As(err, &pe))
			require.Equal(t, tc.detail, pe.Detail)
			require.Equal(t, tc.detail, err.Error())
		})
	}
	require.NotErrorIs(t, publicErr(ErrAgentMismatch, "x"), mcp.ErrBadTool, "no cause, no cause in the chain")
}
