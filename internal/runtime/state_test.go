package runtime

import (
	"encoding/json"
	"testing"

	"hxd/internal/model"
)

// TestPayloadsEncodeLikeMaps: the checkpoint and step payload structs encode
// byte for byte as the maps they replaced (encoding/json sorts map keys).
func TestPayloadsEncodeLikeMaps(t *testing.T) {
	t.Parallel()
	old := func(s *RunState) (a, b []byte) {
		tools := make([]map[string]any, 0, len(s.Tools))
		for i := range s.Tools {
			e := &s.Tools[i]
			m := map[string]any{"execution_key": e.ExecutionKey, "status": e.Status, "attempt": e.Attempt}
			if e.Approved != nil {
				m["approved"] = *e.Approved
			}
			tools = append(tools, m)
		}
		ext := s.Extensions
		if ext == nil {
			ext = map[string]any{}
		}
		a, _ = json.Marshal(map[string]any{"phase": s.Phase, "status": s.Status, "error": s.Error, "extensions": ext, "tools": tools})
		b, _ = json.Marshal(map[string]any{"phase": s.Phase, "response": s.Response, "attempt": s.Attempt})
		return
	}
	for _, s := range []*RunState{
		{},
		{Phase: PhaseTools, Status: StatusRunning, Attempt: 2, Error: &RunError{Type: "X<>", Message: "m&"},
			Extensions: map[string]any{"b": 1, "a": []any{"<x>"}},
			Response:   &model.Response{Text: "hi <b>"},
			Tools:      []ToolEntry{{ExecutionKey: "k1", Status: ToolStarted, Attempt: 1}, {ExecutionKey: "k2", Status: ToolApproval, Approved: ptr(false)}, {ExecutionKey: "k3", Approved: ptr(true)}}},
	} {
		a, b := old(s)
		if got := mustJSON(s.checkpointPayload()); string(got) != string(a) {
			t.Fatalf("checkpoint\n%s\n%s", got, a)
		}
		if got := mustJSON(s.stepPayload()); string(got) != string(b) {
			t.Fatalf("step\n%s\n%s", got, b)
		}
	}
}
