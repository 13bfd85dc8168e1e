package temporal

import (
	"context"
	"fmt"

	"hxd/internal/runtime"
	"hxd/internal/temporal/events"
)

// maxTimelineEvents bounds the events a timeline reads for its marks.
const maxTimelineEvents = 100_000

// RunTimeline answers the get_timeline query of the run's session
// workflow (the model attempts and tool entries it keeps, RunRecord) and
// adds the marks of the run's events that Redis still holds; events it
// lost (expired or trimmed) leave their marks out, never an error. Model
// attempts that Temporal retried inside one activity show as one attempt,
// numbered as the last.
func (e *Engine) RunTimeline(ctx context.Context, runID string) (*runtime.RunTimeline, error) {
	key, err := e.runSession(ctx, runID)
	if err != nil {
		return nil, err
	}
	var src runtime.TimelineSource
	if err := e.query(ctx, key, QueryGetTimeline, &src, runID); err != nil {
		return nil, err
	}
	if src.RunID != runID || src.SessionID != runtime.SessionIDOf(key) {
		return nil, fmt.Errorf("run %s: %w", runID, runtime.ErrNotFound)
	}
	src.Events = e.markEvents(ctx, runID)
	return runtime.BuildTimeline(&src), nil
}

// markEvents reads the run's events that make timeline marks; a read
// that fails ends it with what it has.
func (e *Engine) markEvents(ctx context.Context, runID string) []runtime.RunEvent {
	if e.cfg.Events == nil {
		return nil
	}
	var (
		out   []runtime.RunEvent
		after events.Cursor
	)
	for read := 0; read < maxTimelineEvents; {
		evs, next, _, err := e.cfg.Events.Read(ctx, runID, after, events.MaxReadLimit)
		if err != nil {
			e.log.WarnContext(ctx, "timeline: read run events", "run_id", runID, "error", err)
			return out
		}
		for _, ev := range evs {
			if runtime.MarkEvent(ev.Type) {
				out = append(out, ev)
			}
		}
		if len(evs) == 0 || next == after {
			return out
		}
		read += len(evs)
		after = next
	}
	return out
}
