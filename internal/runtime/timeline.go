package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"hxd/internal/agent"
)

// The run timeline (GET /runs/{run_id}/timeline). Both engines keep, in
// the run state, what it needs: the current step's model attempts
// (RunState.ModelAttempts, written to the steps row with every commit) and
// each tool entry's attempts and approval times (ToolEntry, the tool row
// payload), with times from the engine's clock passed in (the runtime's
// NowFunc, the workflow's workflow.Now): the helpers below are pure. A
// timeline is then built from the step and tool rows alone, so recorded
// and unrecorded runs alike have one; the journal and its checkpoint
// payload are unchanged. Rows stored before this carry no times: their
// attempts are left out, never an error.

// Span outcomes as stored (AttemptSpan.Outcome). The timeline derives
// "retrying" (a failed or uncertain attempt that another follows),
// "awaiting_approval" and "declined" (from an entry's approval times).
const (
	SpanRunning   = "running"
	SpanSucceeded = "succeeded"
	SpanFailed    = "failed"
	SpanRetrying  = "retrying"
	SpanUncertain = "uncertain"
	SpanAwaiting  = "awaiting_approval"
	SpanDeclined  = "declined"
	SpanReset     = "reset"
	SpanCancelled = "cancelled"
	SpanAborted   = "aborted"
)

// AttemptSpan is one model or tool attempt as the run state keeps it: its
// number (the attempt_id of its events), when it started and ended (zero
// while open), its outcome, the error of a failed one, the wait before
// the next attempt, the model of a model attempt (provider only with a
// fallback chain) and how an uncertain tool attempt was resolved.
type AttemptSpan struct {
	Attempt          int       `json:"attempt"`
	StartedAt        time.Time `json:"started_at"`
	EndedAt          time.Time `json:"ended_at,omitzero"`
	Outcome          string    `json:"outcome"`
	Error            *RunError `json:"error,omitempty"`
	RetryWaitSeconds float64   `json:"retry_wait_seconds,omitempty"`
	Model            string    `json:"model,omitempty"`
	Provider         string    `json:"provider,omitempty"`
	Resolution       string    `json:"resolution,omitempty"`
	ResolvedAt       time.Time `json:"resolved_at,omitzero"`
}

// Resumption is when a run was resumed and the status it left.
type Resumption struct {
	At   time.Time `json:"at"`
	From RunStatus `json:"from"`
}

// BeginModelSpan opens the span of the step's current model attempt
// (st.Attempt, already counted) on the current model of def's chain.
func BeginModelSpan(def *agent.Definition, st *RunState, now time.Time) {
	m := ChainModel(def, st.ModelIndex)
	sp := AttemptSpan{Attempt: st.Attempt, StartedAt: now.UTC(), Outcome: SpanRunning, Model: m.Model}
	if ChainLen(def) > 1 {
		sp.Provider = m.Provider
	}
	st.ModelAttempts = appendCapped(st.ModelAttempts, sp)
}

// maxSpans bounds the spans a step or a tool entry keeps, and the
// resumptions a run keeps: past it the oldest go (the timeline then
// starts later, the state stays bounded).
const maxSpans = 100

func appendCapped[T any](s []T, v T) []T {
	if len(s) >= maxSpans {
		s = slices.Delete(s, 0, len(s)-maxSpans+1)
	}
	return append(s, v)
}

// ResetModelSpan marks the step's open model span abandoned (attempt_reset).
func ResetModelSpan(st *RunState, now time.Time) {
	endOpen(st.ModelAttempts, now, SpanReset, nil)
}

// EndModelSpan closes the step's open model span with outcome (and the
// error of a failure); a no-op when none is open.
func EndModelSpan(st *RunState, now time.Time, outcome string, err *RunError) {
	endOpen(st.ModelAttempts, now, outcome, err)
}

// SetModelSpanNumber renumbers the step's last model span (the Temporal
// engine learns the attempt an activity ended on only afterwards).
func SetModelSpanNumber(st *RunState, attempt int) {
	if n := len(st.ModelAttempts); n > 0 && attempt > 0 {
		st.ModelAttempts[n-1].Attempt = attempt
	}
}

// SetModelSpanWait records the wait after the step's last model span.
func SetModelSpanWait(st *RunState, wait time.Duration) {
	if n := len(st.ModelAttempts); n > 0 {
		st.ModelAttempts[n-1].RetryWaitSeconds = wait.Seconds()
	}
}

// BeginToolSpan opens the span of e's current attempt (e.Attempt, already
// counted).
func BeginToolSpan(e *ToolEntry, now time.Time) {
	e.Attempts = appendCapped(e.Attempts, AttemptSpan{Attempt: e.Attempt, StartedAt: now.UTC(), Outcome: SpanRunning})
}

// EndToolSpan closes e's open span with outcome (and the error of a
// failure); a no-op when none is open.
func EndToolSpan(e *ToolEntry, now time.Time, outcome string, err *RunError) {
	endOpen(e.Attempts, now, outcome, err)
}

// SetToolSpanNumber renumbers e's last span (see SetModelSpanNumber).
func SetToolSpanNumber(e *ToolEntry, attempt int) {
	if n := len(e.Attempts); n > 0 && attempt > 0 {
		e.Attempts[n-1].Attempt = attempt
	}
}

// SetToolSpanWait records the wait after e's last span.
func SetToolSpanWait(e *ToolEntry, wait time.Duration) {
	if n := len(e.Attempts); n > 0 {
		e.Attempts[n-1].RetryWaitSeconds = wait.Seconds()
	}
}

// RequestApproval records when e started to wait for an approval.
func RequestApproval(e *ToolEntry, now time.Time) {
	if e.ApprovalRequestedAt.IsZero() {
		e.ApprovalRequestedAt = now.UTC()
	}
}

// NoteResumed records that st was resumed at now from status from.
func NoteResumed(st *RunState, now time.Time, from RunStatus) {
	st.Resumptions = appendCapped(st.Resumptions, Resumption{At: now.UTC(), From: from})
}

// resolveSpan records decision dec on e's last span (resolveEntry).
func resolveSpan(e *ToolEntry, dec decision) {
	n := len(e.Attempts)
	if n == 0 {
		return
	}
	sp := &e.Attempts[n-1]
	sp.ResolvedAt = dec.at.UTC()
	switch {
	case dec.abort:
		sp.Resolution, sp.Outcome = "abort", SpanAborted
	case dec.retry:
		sp.Resolution = "retry"
		if sp.Outcome == SpanRunning {
			sp.Outcome = SpanUncertain
		}
	default:
		sp.Resolution, sp.Outcome = "result", SpanSucceeded
	}
}

func endOpen(spans []AttemptSpan, now time.Time, outcome string, err *RunError) {
	n := len(spans)
	if n == 0 || spans[n-1].Outcome != SpanRunning {
		return
	}
	sp := &spans[n-1]
	sp.EndedAt, sp.Outcome, sp.Error = now.UTC(), outcome, err
}

// RunTimeline is a run's timeline: lanes ("model" first, then one per
// tool in the order of its first call), attempts (by start, then step,
// then lane) and marks (by time).
type RunTimeline struct {
	RunID     string
	SessionID string
	Status    RunStatus
	CreatedAt time.Time
	UpdatedAt time.Time
	Lanes     []TimelineLane
	Attempts  []TimelineAttempt
	Marks     []TimelineMark
}

// Lane kinds.
const (
	LaneModel = "model"
	LaneTool  = "tool"
)

// TimelineLane is a lane: ID "model" or "tool:<name>".
type TimelineLane struct {
	ID   string
	Kind string
	Tool string
}

// TimelineAttempt is one bar of the timeline.
type TimelineAttempt struct {
	Lane         string
	Kind         string
	StepID       string
	Span         AttemptSpan
	Tool         string
	CallID       string
	ExecutionKey string
	ReplayPolicy string
	Approval     *TimelineApproval
}

// TimelineApproval is the approval a tool attempt needed.
type TimelineApproval struct {
	RequestedAt time.Time
	DecidedAt   time.Time // zero while awaited
	Approved    *bool     // nil while awaited
}

// Mark types.
const (
	MarkPaused           = "paused"
	MarkResumed          = "resumed"
	MarkCancelled        = "cancelled"
	MarkApprovalRequired = "approval_required"
	MarkApprovalGiven    = "approval_given"
	MarkApprovalDeclined = "approval_declined"
	MarkResolved         = "resolved"
	MarkAttemptReset     = "attempt_reset"
	MarkFailed           = "failed"
	MarkCompleted        = "completed"
)

// TimelineMark is something that happened to the run at one instant.
type TimelineMark struct {
	Type         string
	At           time.Time
	StepID       string
	ExecutionKey string
	Detail       string
}

// StepSpans are the model attempts of one step.
type StepSpans struct {
	StepID   string
	Attempts []AttemptSpan
}

// TimelineSource is what a timeline is built from: the run, the model
// attempts of its steps, its tool entries (any order, one per execution
// key, the newest), its resumptions and its events (for the marks; only
// those of the types marks come from are needed).
type TimelineSource struct {
	RunID       string
	SessionID   string
	Status      RunStatus
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Steps       []StepSpans
	Tools       []ToolEntry
	Resumptions []Resumption
	Events      []RunEvent
}

// MarkEvent reports whether events of type typ make timeline marks.
func MarkEvent(typ string) bool {
	return typ == EventRunResult || typ == EventApprovalRequired || typ == EventAttemptReset
}

// BuildTimeline builds a run's timeline (pure).
func BuildTimeline(src *TimelineSource) *RunTimeline {
	tl := &RunTimeline{
		RunID: src.RunID, SessionID: src.SessionID, Status: src.Status,
		CreatedAt: src.CreatedAt.UTC(), UpdatedAt: src.UpdatedAt.UTC(),
		Lanes: []TimelineLane{{ID: LaneModel, Kind: LaneModel}}, Attempts: []TimelineAttempt{}, Marks: []TimelineMark{},
	}
	for _, s := range src.Steps {
		for i, sp := range s.Attempts {
			sp.Outcome = spanOutcome(sp, i+1 < len(s.Attempts))
			tl.Attempts = append(tl.Attempts, TimelineAttempt{Lane: LaneModel, Kind: LaneModel, StepID: s.StepID, Span: sp})
		}
	}
	tools := slices.Clone(src.Tools)
	slices.SortStableFunc(tools, func(a, b ToolEntry) int {
		return cmp.Or(cmp.Compare(stepNumber(src.RunID, a.ExecutionKey), stepNumber(src.RunID, b.ExecutionKey)),
			firstTime(&a).Compare(firstTime(&b)), cmp.Compare(a.ExecutionKey, b.ExecutionKey))
	})
	var toolAttempts []TimelineAttempt
	for i := range tools {
		toolAttempts = append(toolAttempts, toolBars(src.RunID, &tools[i])...)
		tl.Marks = append(tl.Marks, toolMarks(src.RunID, &tools[i])...)
	}
	// Lanes in the order of each tool's first bar.
	slices.SortStableFunc(toolAttempts, func(a, b TimelineAttempt) int { return a.Span.StartedAt.Compare(b.Span.StartedAt) })
	lane := map[string]int{LaneModel: 0}
	for _, a := range toolAttempts {
		if _, ok := lane[a.Lane]; !ok {
			lane[a.Lane] = len(tl.Lanes)
			tl.Lanes = append(tl.Lanes, TimelineLane{ID: a.Lane, Kind: LaneTool, Tool: a.Tool})
		}
	}
	tl.Attempts = append(tl.Attempts, toolAttempts...)
	// By start, then (for equal times, as a clock that did not move
	// gives) step, then lane.
	slices.SortStableFunc(tl.Attempts, func(a, b TimelineAttempt) int {
		x, _ := strconv.Atoi(a.StepID)
		y, _ := strconv.Atoi(b.StepID)
		return cmp.Or(a.Span.StartedAt.Compare(b.Span.StartedAt), cmp.Compare(x, y), cmp.Compare(lane[a.Lane], lane[b.Lane]))
	})
	for _, r := range src.Resumptions {
		tl.Marks = append(tl.Marks, TimelineMark{Type: MarkResumed, At: r.At.UTC(), Detail: string(r.From)})
	}
	for i := range src.Events {
		if m, ok := eventMark(&src.Events[i]); ok {
			tl.Marks = append(tl.Marks, m)
		}
	}
	slices.SortStableFunc(tl.Marks, func(a, b TimelineMark) int { return a.At.Compare(b.At) })
	closeCancelled(tl)
	return tl
}

// closeCancelled ends, at the run's last cancel, the bars of a cancelled
// run still open (an approval never decided, an attempt the engine could
// not close): nothing of them goes on.
func closeCancelled(tl *RunTimeline) {
	if tl.Status != StatusCancelled {
		return
	}
	var end time.Time
	for _, m := range tl.Marks {
		if m.Type == MarkCancelled {
			end = m.At
		}
	}
	if end.IsZero() {
		return
	}
	for i := range tl.Attempts {
		sp := &tl.Attempts[i].Span
		if sp.EndedAt.IsZero() && (sp.Outcome == SpanRunning || sp.Outcome == SpanAwaiting) && !sp.StartedAt.After(end) {
			sp.EndedAt, sp.Outcome = end, SpanCancelled
		}
	}
}

// spanOutcome is a stored span's outcome on the timeline: a failed or
// uncertain attempt that another follows is retrying, an open one that
// another follows was abandoned (reset).
func spanOutcome(sp AttemptSpan, followed bool) string {
	if !followed {
		return sp.Outcome
	}
	switch sp.Outcome {
	case SpanFailed, SpanUncertain:
		return SpanRetrying
	case SpanRunning:
		return SpanReset
	}
	return sp.Outcome
}

// stepNumber is the step of an execution key "<run_id>:<step>:<call id>"
// (0 when it has none).
func stepNumber(runID, key string) int {
	rest, ok := strings.CutPrefix(key, runID+":")
	if !ok {
		return 0
	}
	s, _, _ := strings.Cut(rest, ":")
	n, _ := strconv.Atoi(s)
	return n
}

func firstTime(e *ToolEntry) time.Time {
	if !e.ApprovalRequestedAt.IsZero() {
		return e.ApprovalRequestedAt
	}
	if len(e.Attempts) > 0 {
		return e.Attempts[0].StartedAt
	}
	return time.Time{}
}

// toolBars are the bars of one tool entry: one per attempt, plus one for
// an approval awaited or declined (numbered as the attempt it would be).
func toolBars(runID string, e *ToolEntry) []TimelineAttempt {
	bar := func(sp AttemptSpan) TimelineAttempt {
		return TimelineAttempt{
			Lane: "tool:" + e.Call.Name, Kind: LaneTool, StepID: strconv.Itoa(stepNumber(runID, e.ExecutionKey)), Span: sp,
			Tool: e.Call.Name, CallID: e.Call.ID, ExecutionKey: e.ExecutionKey, ReplayPolicy: e.Policy,
		}
	}
	var out []TimelineAttempt
	for i, sp := range e.Attempts {
		sp.Outcome = spanOutcome(sp, i+1 < len(e.Attempts))
		out = append(out, bar(sp))
	}
	if e.ApprovalRequestedAt.IsZero() {
		return out
	}
	ap := &TimelineApproval{RequestedAt: e.ApprovalRequestedAt.UTC(), DecidedAt: e.ApprovalDecidedAt.UTC()}
	if !e.ApprovalDecidedAt.IsZero() {
		ap.Approved = Ptr(e.Approved != nil && *e.Approved)
	}
	switch {
	case ap.Approved != nil && *ap.Approved && len(out) > 0:
		out[0].Approval = ap
	case ap.Approved == nil || !*ap.Approved:
		sp := AttemptSpan{Attempt: e.Attempt + 1, StartedAt: ap.RequestedAt, Outcome: SpanAwaiting}
		if ap.Approved != nil {
			sp.EndedAt, sp.Outcome = ap.DecidedAt, SpanDeclined
		}
		b := bar(sp)
		b.Approval = ap
		out = append(out, b)
	}
	return out
}

// toolMarks are an entry's approval decision and resolutions.
func toolMarks(runID string, e *ToolEntry) []TimelineMark {
	step := strconv.Itoa(stepNumber(runID, e.ExecutionKey))
	var out []TimelineMark
	if !e.ApprovalDecidedAt.IsZero() {
		typ := MarkApprovalDeclined
		if e.Approved != nil && *e.Approved {
			typ = MarkApprovalGiven
		}
		out = append(out, TimelineMark{Type: typ, At: e.ApprovalDecidedAt.UTC(), StepID: step, ExecutionKey: e.ExecutionKey})
	}
	for _, sp := range e.Attempts {
		if sp.Resolution != "" && !sp.ResolvedAt.IsZero() {
			out = append(out, TimelineMark{Type: MarkResolved, At: sp.ResolvedAt.UTC(), StepID: step, ExecutionKey: e.ExecutionKey, Detail: sp.Resolution})
		}
	}
	return out
}

// eventMark is the mark an event makes, if any.
func eventMark(ev *RunEvent) (TimelineMark, bool) {
	m := TimelineMark{At: ev.CreatedAt.UTC(), StepID: ev.StepID}
	switch ev.Type {
	case EventApprovalRequired, EventAttemptReset:
		var d struct {
			ExecutionKey string `json:"execution_key"`
			Attempt      int    `json:"attempt"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		m.Type, m.ExecutionKey = MarkApprovalRequired, d.ExecutionKey
		if ev.Type == EventAttemptReset {
			m.Type, m.Detail = MarkAttemptReset, strconv.Itoa(d.Attempt)
		}
		return m, true
	case EventRunResult:
		var d struct {
			Status RunStatus `json:"status"`
			Error  *RunError `json:"error"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return m, false
		}
		switch d.Status {
		case StatusPaused:
			m.Type = MarkPaused
		case StatusCancelled:
			m.Type = MarkCancelled
		case StatusCompleted:
			m.Type = MarkCompleted
		case StatusFailed:
			m.Type = MarkFailed
			if d.Error != nil {
				m.Detail = d.Error.Message
			}
		default:
			return m, false
		}
		if d.Error != nil && m.Type == MarkCancelled {
			m.Detail = d.Error.Message
		}
		return m, true
	}
	return m, false
}

// maxTimelineEvents bounds the events a timeline reads for its marks.
const maxTimelineEvents = 100_000

// RunTimeline returns a run's timeline, built from its step and tool rows
// and, for the marks, its events. Errors: ErrNotFound (also for a run the
// caller does not own).
func (r *Runtime) RunTimeline(ctx context.Context, runID string) (*RunTimeline, error) {
	row, err := r.ownedRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	rows, err := r.store.RunRowsGet(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read run rows: %w", err)
	}
	st, err := decodeState(row.State)
	if err != nil {
		return nil, err
	}
	src := &TimelineSource{
		RunID: row.ID, SessionID: SessionIDOf(row.SessionID), Status: row.Status,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt, Resumptions: st.Resumptions,
	}
	cur := st.stepID()
	for _, s := range rows.Steps {
		if s.ID == cur {
			continue // the state's is the newest
		}
		var p stepPayload
		if err := json.Unmarshal(s.Payload, &p); err != nil {
			r.log.WarnContext(ctx, "timeline: undecodable step row", "run_id", runID, "step_id", s.ID, "error", err)
			continue
		}
		src.Steps = append(src.Steps, StepSpans{StepID: s.ID, Attempts: p.Attempts})
	}
	if len(st.ModelAttempts) > 0 {
		src.Steps = append(src.Steps, StepSpans{StepID: cur, Attempts: st.ModelAttempts})
	}
	inState := map[string]bool{}
	for i := range st.Tools {
		inState[st.Tools[i].ExecutionKey] = true
		src.Tools = append(src.Tools, st.Tools[i])
	}
	for _, t := range rows.Tools {
		if inState[t.ExecutionKey] {
			continue // the state's is the newest
		}
		var e ToolEntry
		if err := json.Unmarshal(t.Payload, &e); err != nil {
			r.log.WarnContext(ctx, "timeline: undecodable tool row", "run_id", runID, "execution_key", t.ExecutionKey, "error", err)
			continue
		}
		src.Tools = append(src.Tools, e)
	}
	var after int64
	for read := 0; read < maxTimelineEvents; {
		evs, err := r.store.EventListAfter(ctx, runID, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		for _, ev := range evs {
			if MarkEvent(ev.Type) {
				src.Events = append(src.Events, ev)
			}
		}
		if len(evs) < 1000 {
			break
		}
		read += len(evs)
		if after, err = strconv.ParseInt(evs[len(evs)-1].Cursor, 10, 64); err != nil {
			return nil, fmt.Errorf("list events: cursor %q: %w", evs[len(evs)-1].Cursor, err)
		}
	}
	return BuildTimeline(src), nil
}
