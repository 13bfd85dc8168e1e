package rtstore

import "fmt"

// CheckDeltaOnly reports ErrInvalidCommit when c, a DeltaOnly commit,
// names anything but events and their records (Status, Phase, State,
// Step, Tools, Records or Snapshot). Stores call it before writing.
func CheckDeltaOnly(c *Commit) error {
	switch {
	case c.Status != "" || c.Phase != "":
		return fmt.Errorf("%w: it sets the run status or phase", ErrInvalidCommit)
	case c.State != nil || c.Snapshot:
		return fmt.Errorf("%w: it writes the run state", ErrInvalidCommit)
	case c.StepID != "" || c.Step != nil:
		return fmt.Errorf("%w: it writes a step", ErrInvalidCommit)
	case len(c.Tools) > 0:
		return fmt.Errorf("%w: it writes tool rows", ErrInvalidCommit)
	case len(c.Records) > 0:
		return fmt.Errorf("%w: it holds boundary records", ErrInvalidCommit)
	case c.TraceContext != "":
		return fmt.Errorf("%w: it writes the run's trace context", ErrInvalidCommit)
	}
	return nil
}

// CheckTraceContext refuses a trace context (RunRow.TraceContext,
// Commit.TraceContext) longer than MaxTraceContext.
func CheckTraceContext(tc string) error {
	if len(tc) > MaxTraceContext {
		return fmt.Errorf("trace context of %d bytes, more than %d", len(tc), MaxTraceContext)
	}
	return nil
}
