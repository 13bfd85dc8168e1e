package tool

import "context"

// clientTool is a tool whose result the API client posts (resolve
// {result}); the run waits in awaiting_input meanwhile.
type clientTool struct {
	base
}

// Call returns ErrClientResult: the runtime must stop and wait for the
// client to post the result.
func (t *clientTool) Call(context.Context, Invocation) (Outcome, error) {
	return Outcome{}, ErrClientResult
}
