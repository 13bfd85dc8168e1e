package hxbundle

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Completeness (REFERENCE §7.4, `_completeness` in harnessx/recorder.py):
// the issues of a structurally valid bundle, in this order, each at most
// once.
const (
	IssueInitialRunRecordMissing      = "initial_run_record_missing"
	IssuePayloadsOmittedOrRedacted    = "payloads_omitted_or_redacted"
	IssueArtifactsUnavailable         = "artifacts_unavailable"
	IssueRunNotTerminalAtExport       = "run_not_terminal_at_export"
	IssueUnresolvedToolOutcome        = "unresolved_tool_outcome"
	IssueCheckpointMissing            = "checkpoint_missing"
	IssueModelBoundariesMissing       = "model_boundaries_missing"
	IssueToolBoundariesMissing        = "tool_boundaries_missing"
	IssueModelAttemptIncomplete       = "model_attempt_incomplete"
	IssueToolAttemptOutcomeUnresolved = "tool_attempt_outcome_unresolved"
)

// maxDetailsPerIssue bounds the details listed for one issue; a last
// detail says how many more there were.
const maxDetailsPerIssue = 20

// Boundaries seen for one attempt.
const (
	bStarted   uint8 = 1 << iota
	bResponse        // model.response
	bProcessed       // model.processed
	bReturned        // tool.returned
	bResolved        // tool.resolved with a result
)

// attemptKey is a model attempt (step_id, attempt_id) or a tool attempt
// (execution_key, attempt_id).
type attemptKey struct{ a, b string }

// attemptState is the boundary tracking of one attempt.
type attemptState struct {
	seen uint8
	open bool
	// openSeq is the record that opened the attempt (model.started,
	// tool.dispatched).
	openSeq int
}

// tracker runs the completeness pass record by record, as the records
// stream in; its result is used only if every validity check passes.
type tracker struct {
	records       int
	firstKind     string
	notPresent    int // records with capture ≠ present
	firstNotPres  int
	models, tools map[attemptKey]*attemptState
	modelGaps     []Detail
	toolGaps      []Detail
	modelGapCount int
	toolGapCount  int

	checkpointSeen bool
	// lastCheckpoint is the payload of the last checkpoint record if its
	// capture is present (else nil), kept as JSON text.
	lastCheckpoint    []byte
	lastCheckpointSeq int
	// noExecutionKey is the first record without an execution_key field:
	// `_completeness` subscripts it on every record (KeyError).
	noExecutionKey     int
	noExecutionKeyKind string
}

func newTracker() *tracker {
	return &tracker{models: map[attemptKey]*attemptState{}, tools: map[attemptKey]*attemptState{}}
}

// trackedRecord is what the completeness pass needs of a record.
type trackedRecord struct {
	seq          int
	kind         string
	capture      string
	stepID       string
	attemptID    string
	executionKey string
	hasExecKey   bool
	// resolvedWithResult: tool.resolved, present, payload.result not null.
	resolvedWithResult bool
	// payload is the payload text of a present checkpoint.
	payload []byte
}

func (t *tracker) state(m map[attemptKey]*attemptState, k attemptKey) *attemptState {
	s := m[k]
	if s == nil {
		s = &attemptState{}
		m[k] = s
	}
	return s
}

func (t *tracker) gap(model bool, r *trackedRecord, why string) {
	d := Detail{Member: memberRecords, Seq: r.seq, Kind: r.kind, StepID: clip(r.stepID), AttemptID: clip(r.attemptID), Message: why}
	if model {
		t.modelGapCount++
		d.Issue = IssueModelBoundariesMissing
		if len(t.modelGaps) < maxDetailsPerIssue {
			t.modelGaps = append(t.modelGaps, d)
		}
		return
	}
	d.ExecutionKey = clip(r.executionKey)
	t.toolGapCount++
	d.Issue = IssueToolBoundariesMissing
	if len(t.toolGaps) < maxDetailsPerIssue {
		t.toolGaps = append(t.toolGaps, d)
	}
}

// add tracks one (valid) record.
func (t *tracker) add(r *trackedRecord) {
	t.records++
	if t.records == 1 {
		t.firstKind = r.kind
	}
	if r.capture != capturePresent {
		t.notPresent++
		if t.firstNotPres == 0 {
			t.firstNotPres = r.seq
		}
	}
	if !r.hasExecKey && t.noExecutionKey == 0 {
		t.noExecutionKey, t.noExecutionKeyKind = r.seq, r.kind
	}
	model := attemptKey{r.stepID, r.attemptID}
	tool := attemptKey{r.executionKey, r.attemptID}
	switch r.kind {
	case "model.started":
		s := t.state(t.models, model)
		s.seen, s.open, s.openSeq = bStarted, true, r.seq
	case "model.response":
		s := t.state(t.models, model)
		if s.seen&bStarted == 0 {
			t.gap(true, r, "model.response without model.started")
		}
		s.seen |= bResponse
	case "model.processed":
		s := t.state(t.models, model)
		if s.seen&bResponse == 0 {
			t.gap(true, r, "model.processed without model.response")
		}
		s.seen |= bProcessed
	case "model.completed", "model.failed":
		s := t.models[model]
		if r.kind == "model.completed" && (s == nil || s.seen != bStarted|bResponse|bProcessed) {
			t.gap(true, r, "model.completed without exactly model.started, model.response and model.processed")
		}
		if s != nil {
			s.open = false
		}
	case "tool.started":
		s := t.state(t.tools, tool)
		s.seen = bStarted
	case "tool.dispatched":
		s := t.state(t.tools, tool)
		if s.seen&bStarted == 0 {
			t.gap(false, r, "tool.dispatched without tool.started")
		}
		if !s.open {
			s.open, s.openSeq = true, r.seq
		}
	case "tool.returned":
		s := t.state(t.tools, tool)
		if s.seen&bStarted == 0 {
			t.gap(false, r, "tool.returned without tool.started")
		}
		s.seen |= bReturned
		s.open = false
	case "tool.processed":
		s := t.tools[tool]
		if s == nil || s.seen&(bReturned|bResolved) == 0 {
			t.gap(false, r, "tool.processed without tool.returned or tool.resolved")
		}
	case "tool.resolved":
		if r.resolvedWithResult {
			s := t.state(t.tools, tool)
			s.open = false
			s.seen |= bResolved
		}
	case "checkpoint":
		t.checkpointSeen = true
		t.lastCheckpoint, t.lastCheckpointSeq = nil, 0
		if r.capture == capturePresent {
			t.lastCheckpoint, t.lastCheckpointSeq = r.payload, r.seq
		}
	}
}

// manifestView is what the completeness pass reads from the manifest.
type manifestView struct {
	status     string
	phase      string
	artifacts  jv // object of descriptors (validated)
	unresolved jv // array of operations (validated)
}

// finish returns the issues and their details, or the failure of the
// checkpoint consistency check (REFERENCE §7.3 item 24) or of a record
// without an execution_key field.
func (t *tracker) finish(m manifestView) ([]string, []Detail, *failure) {
	if t.noExecutionKey > 0 {
		return nil, nil, &failure{msg: generic(pyKeyError), detail: Detail{
			Member: memberRecords, Seq: t.noExecutionKey, Kind: t.noExecutionKeyKind,
			Message: "record has no execution_key field (the reference's completeness pass subscripts it)",
		}}
	}
	var issues []string
	var details []Detail
	add := func(issue string, ds ...Detail) {
		issues = append(issues, issue)
		for _, d := range ds {
			d.Issue = issue
			details = append(details, d)
		}
	}
	if t.records == 0 {
		add(IssueInitialRunRecordMissing, Detail{Member: memberRecords, Message: "the bundle has no records"})
	} else if t.firstKind != "run.started" {
		add(IssueInitialRunRecordMissing, Detail{Member: memberRecords, Seq: 1, Kind: t.firstKind,
			Message: "the first record is not run.started"})
	}
	if t.notPresent > 0 {
		add(IssuePayloadsOmittedOrRedacted, Detail{Member: memberRecords, Seq: t.firstNotPres,
			Message: fmt.Sprintf("%d of %d records have capture omitted or redacted", t.notPresent, t.records)})
	}
	var unavailable []Detail
	m.artifacts.members(func(key, desc jv) bool {
		if !desc.get("status").isStr("included") {
			k, _ := key.str()
			st, _ := desc.get("status").str()
			unavailable = append(unavailable, Detail{Member: "artifacts/" + k, Message: "artifact status " + st})
		}
		return true
	})
	if len(unavailable) > 0 {
		add(IssueArtifactsUnavailable, capDetails(unavailable)...)
	}
	if !slices.Contains([]string{"completed", "failed", "cancelled"}, m.status) {
		add(IssueRunNotTerminalAtExport, Detail{Member: memberManifest, Message: "run status at export: " + m.status})
	}
	if m.unresolved.length() > 0 {
		var ds []Detail
		m.unresolved.elems(func(op jv) bool {
			ek, _ := op.get("execution_key").str()
			st, _ := op.get("status").str()
			ds = append(ds, Detail{Member: memberManifest, ExecutionKey: clip(ek),
				AttemptID: clip(string(op.get("attempt").raw())), Message: "tool outcome unknown, status " + st})
			return true
		})
		add(IssueUnresolvedToolOutcome, capDetails(ds)...)
	}
	if !t.checkpointSeen {
		add(IssueCheckpointMissing, Detail{Member: memberRecords, Message: "no checkpoint record"})
	}
	if t.modelGapCount > 0 {
		add(IssueModelBoundariesMissing, withMore(t.modelGaps, t.modelGapCount)...)
	}
	if t.toolGapCount > 0 {
		add(IssueToolBoundariesMissing, withMore(t.toolGaps, t.toolGapCount)...)
	}
	if ds := openAttempts(t.models, true); len(ds) > 0 {
		add(IssueModelAttemptIncomplete, capDetails(ds)...)
	}
	if ds := openAttempts(t.tools, false); len(ds) > 0 {
		add(IssueToolAttemptOutcomeUnresolved, capDetails(ds)...)
	}
	if t.lastCheckpoint != nil {
		if f := checkpointConsistency(t.lastCheckpoint, t.lastCheckpointSeq, m); f != nil {
			return nil, nil, f
		}
	}
	return issues, details, nil
}

// openAttempts lists the attempts left open, in the order they opened.
func openAttempts(m map[attemptKey]*attemptState, model bool) []Detail {
	type open struct {
		k attemptKey
		s *attemptState
	}
	var list []open
	for k, s := range m {
		if s.open {
			list = append(list, open{k, s})
		}
	}
	slices.SortFunc(list, func(a, b open) int { return cmp.Compare(a.s.openSeq, b.s.openSeq) })
	ds := make([]Detail, 0, len(list))
	for _, o := range list {
		if model {
			ds = append(ds, Detail{Member: memberRecords, Seq: o.s.openSeq, Kind: "model.started",
				StepID: clip(o.k.a), AttemptID: clip(o.k.b), Message: "model attempt started but neither completed nor failed"})
		} else {
			ds = append(ds, Detail{Member: memberRecords, Seq: o.s.openSeq, Kind: "tool.dispatched",
				ExecutionKey: clip(o.k.a), AttemptID: clip(o.k.b), Message: "tool attempt dispatched but neither returned nor resolved"})
		}
	}
	return ds
}

// capDetails keeps the first maxDetailsPerIssue details and counts the rest.
func capDetails(ds []Detail) []Detail {
	if len(ds) <= maxDetailsPerIssue {
		return ds
	}
	return withMore(ds[:maxDetailsPerIssue], len(ds))
}

func withMore(ds []Detail, total int) []Detail {
	if total > len(ds) {
		ds = append(slices.Clip(ds), Detail{Message: fmt.Sprintf("%d more not listed", total-len(ds))})
	}
	return ds
}

// checkpointConsistency is REFERENCE §7.3 item 24 on the payload of the
// last checkpoint (capture present).
func checkpointConsistency(payload []byte, seq int, m manifestView) *failure {
	at := Detail{Member: memberRecords, Seq: seq, Kind: "checkpoint"}
	fail := func(msg, why string) *failure {
		d := at
		d.Message = why
		return &failure{msg: msg, detail: d}
	}
	var doc jsonDoc
	if e := doc.parse(payload); e != nil { // it parsed once already
		return fail(e.msg, e.why)
	}
	c := doc.root()
	if !c.isObject() {
		// Unreachable from a bundle: a present payload is always an object.
		return fail(msgCheckpointPayload, "checkpoint payload is not an object")
	}
	if !c.get("status").isStr(m.status) || !c.get("phase").isStr(m.phase) {
		return fail(msgCheckpointState, "last checkpoint status/phase differ from the manifest")
	}
	// expected = [{k: t[k] for k in (execution_key, status, attempt)}
	//             for t in C.get("tools", []) if t["status"] in (started, uncertain)]
	type op struct{ ek, st, attempt jv }
	var expected []op
	tools := c.get("tools")
	switch tools.kind() {
	case jsonNull:
		if tools.exists() {
			return fail(generic(pyTypeError), "checkpoint tools is null")
		}
	case jsonTrue, jsonFalse, jsonNumber:
		return fail(generic(pyTypeError), "checkpoint tools is not iterable")
	case jsonString:
		if len(tools.raw()) > 0 { // iterates characters: "c"["status"]
			return fail(generic(pyTypeError), "checkpoint tools is a string")
		}
	case jsonObject:
		if tools.length() > 0 { // iterates keys: "key"["status"]
			return fail(generic(pyTypeError), "checkpoint tools is an object")
		}
	case jsonArray:
		var f *failure
		tools.elems(func(t jv) bool {
			if !t.isObject() {
				f = fail(generic(pyTypeError), "checkpoint tools entry is not an object")
				return false
			}
			st := t.get("status")
			if !st.exists() {
				f = fail(generic(pyKeyError), "checkpoint tools entry has no status")
				return false
			}
			if !st.strIn("started", "uncertain") {
				return true
			}
			ek, attempt := t.get("execution_key"), t.get("attempt")
			if !ek.exists() || !attempt.exists() {
				f = fail(generic(pyKeyError), "checkpoint tools entry has no execution_key or attempt")
				return false
			}
			expected = append(expected, op{ek, st, attempt})
			return true
		})
		if f != nil {
			return f
		}
	}
	// expected == manifest["unresolved_operations"]
	equal := m.unresolved.length() == len(expected)
	k := 0
	m.unresolved.elems(func(u jv) bool {
		if !equal {
			return false
		}
		e := expected[k]
		k++
		equal = u.length() == 3 && u.has("execution_key") && u.has("status") && u.has("attempt") &&
			pyEqual(e.ek, u.get("execution_key")) && pyEqual(e.st, u.get("status")) && pyEqual(e.attempt, u.get("attempt"))
		return equal
	})
	if !equal {
		return fail(msgUnresolvedMismatch, "started/uncertain tools of the last checkpoint differ from unresolved_operations")
	}
	return nil
}

// clip shortens an identifier taken from a bundle for a Detail.
func clip(s string) string {
	return truncate(strings.ToValidUTF8(s, "\ufffd"), 200)
}
