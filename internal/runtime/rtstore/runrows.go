package rtstore

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
)

// Row kinds of the query both stores answer RunRowsGet with: one row per
// (kind, id, payload) of steps, tool_outcomes and approvals.
const (
	RowStep    = "s"
	RowOutcome = "o"
	RowPending = "a"
)

// RunRowsCollector gathers the rows of a RunRowsGet query, in any order.
type RunRowsCollector struct {
	steps    []StepRow
	outcomes map[string]json.RawMessage
	pending  map[string]json.RawMessage
}

// Add takes one row of kind RowStep, RowOutcome or RowPending (others are
// ignored). payload is copied.
func (c *RunRowsCollector) Add(kind, id string, payload []byte) {
	p := json.RawMessage(slices.Clone(payload))
	switch kind {
	case RowStep:
		c.steps = append(c.steps, StepRow{ID: id, Payload: p})
	case RowOutcome:
		if c.outcomes == nil {
			c.outcomes = map[string]json.RawMessage{}
		}
		c.outcomes[id] = p
	case RowPending:
		if c.pending == nil {
			c.pending = map[string]json.RawMessage{}
		}
		c.pending[id] = p
	}
}

// Rows returns the rows gathered, ordered as RunRows says.
func (c *RunRowsCollector) Rows() *RunRows {
	out := &RunRows{Steps: c.steps, Tools: []ToolRow{}}
	if out.Steps == nil {
		out.Steps = []StepRow{}
	}
	slices.SortFunc(out.Steps, func(a, b StepRow) int {
		x, _ := strconv.Atoi(a.ID)
		y, _ := strconv.Atoi(b.ID)
		return cmp.Or(cmp.Compare(x, y), cmp.Compare(a.ID, b.ID))
	})
	for k, p := range c.outcomes {
		out.Tools = append(out.Tools, ToolRow{ExecutionKey: k, HasOutcome: true, Payload: p})
	}
	for k, p := range c.pending {
		if _, ok := c.outcomes[k]; !ok {
			out.Tools = append(out.Tools, ToolRow{ExecutionKey: k, Payload: p})
		}
	}
	slices.SortFunc(out.Tools, func(a, b ToolRow) int { return cmp.Compare(a.ExecutionKey, b.ExecutionKey) })
	return out
}
