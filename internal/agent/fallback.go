package agent

import (
	"errors"
	"fmt"
	"strings"

	"hxd/internal/model"
)

// chainField is the path of field key of model i of the chain: model.key
// for the model section itself (i 0), model.fallback[i-1].key for a
// fallback entry.
func chainField(i int, key string) string {
	if i == 0 {
		return "model." + key
	}
	return fmt.Sprintf("model.fallback[%d].%s", i-1, key)
}

// modelProblem turns a problem model.Config.Validate reported into a
// *FieldError on the model section, or on model.fallback[i] for a
// fallback entry's.
func modelProblem(e error) error {
	field, problem := "model", e
	var fe *model.FallbackError
	if errors.As(e, &fe) {
		field, problem = fmt.Sprintf("model.fallback[%d]", fe.Index), fe.Err
	}
	msg := strings.TrimPrefix(problem.Error(), model.ErrInvalidConfig.Error()+": ")
	return &FieldError{Field: field, Problem: msg, Cause: e}
}

// validateScript checks the script of model section m (at field, e.g.
// model.script or model.fallback[0].script): only the scripted provider
// uses one, and its tool calls need an id unique in their step and the
// name of a tool the agent may have (known).
func validateScript(field string, m model.Config, known func(string) bool) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(m.Script) > 0 && m.Provider != model.ProviderScripted && m.Provider != "" {
		add(field, "only used by the scripted provider")
	}
	for i, step := range m.Script {
		prefix := fmt.Sprintf("%s[%d]", field, i)
		if step.FailAttempts < 0 {
			add(prefix+".fail_attempts", "must not be negative")
		}
		switch {
		case step.FailAfterDeltas < 0:
			add(prefix+".fail_after_deltas", "must not be negative")
		case step.FailAfterDeltas > 0 && step.FailAttempts == 0:
			add(prefix+".fail_after_deltas", "needs fail_attempts")
		case step.FailAfterDeltas > len(model.SplitPieces(step.Text)):
			add(prefix+".fail_after_deltas", "exceeds the pieces of the step's text")
		}
		ids := make(map[string]bool, len(step.ToolCalls))
		for j, c := range step.ToolCalls {
			cp := fmt.Sprintf("%s.tool_calls[%d]", prefix, j)
			switch {
			case c.ID == "":
				add(cp+".id", "required")
			case ids[c.ID]:
				add(cp+".id", "duplicate tool call id %q", c.ID)
			}
			ids[c.ID] = true
			switch {
			case c.Name == "":
				add(cp+".name", "required")
			case !known(c.Name):
				add(cp+".name", "unknown tool %q", c.Name)
			}
		}
	}
	return errs
}
