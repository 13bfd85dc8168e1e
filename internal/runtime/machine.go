package runtime

import (
	"fmt"
	"strconv"
)

// The run loop is data: three pure tables (phase, run status, tool entry
// status) and NextCommand. Commands ask the tables for every change and
// never assign a status ad hoc.

// Outcome is what a command reports to the phase table.
type Outcome string

// Command outcomes.
const (
	OutStarted        Outcome = "started"         // start: user message appended
	OutReady          Outcome = "ready"           // prepare_model: request built
	OutIterationLimit Outcome = "iteration_limit" // prepare_model: max_iterations reached
	OutToolCalls      Outcome = "tool_calls"      // model: response asks for tools
	OutFinal          Outcome = "final"           // model: response is the answer
	OutPrepared       Outcome = "prepared"        // prepare_tools: entries created
	OutCollected      Outcome = "collected"       // tools: every entry completed, results appended
	OutFinished       Outcome = "finished"        // finish: output set
)

var phaseTable = map[Phase]map[Outcome]Phase{
	PhaseStart:        {OutStarted: PhasePrepareModel},
	PhasePrepareModel: {OutReady: PhaseModel, OutIterationLimit: PhaseFinish},
	PhaseModel:        {OutToolCalls: PhasePrepareTools, OutFinal: PhaseFinish},
	PhasePrepareTools: {OutPrepared: PhaseTools},
	PhaseTools:        {OutCollected: PhasePrepareModel},
	PhaseFinish:       {OutFinished: PhaseResult},
}

// NextPhase returns the phase after a command outcome, or an error for an
// illegal pair.
func NextPhase(p Phase, o Outcome) (Phase, error) {
	if n, ok := phaseTable[p][o]; ok {
		return n, nil
	}
	return "", fmt.Errorf("illegal phase transition: %s on %s", p, o)
}

// Command is what the driver runs next: a phase, or CommandResult when the
// run is not running.
type Command string

// CommandResult ends the loop.
const CommandResult Command = "result"

// NextCommand returns "result" whenever status != running, else the phase.
func NextCommand(s *RunState) Command {
	if s.Status != StatusRunning {
		return CommandResult
	}
	return Command(s.Phase)
}

// StatusEvent is what moves a run between statuses.
type StatusEvent string

// Status events.
const (
	EvComplete StatusEvent = "complete"
	EvPause    StatusEvent = "pause"
	EvAwait    StatusEvent = "await"
	EvCancel   StatusEvent = "cancel"
	EvFail     StatusEvent = "fail"
	EvResume   StatusEvent = "resume"
)

var statusTable = map[RunStatus]map[StatusEvent]RunStatus{
	StatusRunning: {
		EvComplete: StatusCompleted, EvPause: StatusPaused, EvAwait: StatusAwaitingInput,
		EvCancel: StatusCancelled, EvFail: StatusFailed,
		EvResume: StatusRunning, // a crashed run is resumed as it stands
	},
	StatusPaused:        {EvResume: StatusRunning, EvCancel: StatusCancelled},
	StatusAwaitingInput: {EvResume: StatusRunning, EvCancel: StatusCancelled},
	StatusFailed:        {EvResume: StatusRunning, EvCancel: StatusCancelled},
	StatusCompleted:     {},
	StatusCancelled:     {},
}

// NextStatus returns the run status after an event, or an error for an
// illegal pair.
func NextStatus(s RunStatus, e StatusEvent) (RunStatus, error) {
	if n, ok := statusTable[s][e]; ok {
		return n, nil
	}
	return "", fmt.Errorf("illegal status transition: %s on %s", s, e)
}

// ToolEvent is what moves a tool entry between statuses.
type ToolEvent string

// Tool entry events.
const (
	TevNeedApproval ToolEvent = "need_approval" // permission ask, not yet approved
	TevApprove      ToolEvent = "approve"       // approve allow=true
	TevDecline      ToolEvent = "decline"       // approve allow=false: "Permission denied"
	TevStart        ToolEvent = "start"         // attempt += 1, tool.started
	TevAnswer       ToolEvent = "answer"        // result without dispatch (deny, invalid input)
	TevReturn       ToolEvent = "return"        // raw result captured
	TevProcess      ToolEvent = "process"       // result middleware applied
	TevUnknown      ToolEvent = "unknown"       // manual tool lost its outcome (crash, failure, interrupt)
	TevRetry        ToolEvent = "retry"         // automatic retry of a non-manual tool
	TevResolveRetry ToolEvent = "resolve_retry" // resolve {retry}
	TevResolveValue ToolEvent = "resolve_value" // resolve {result}
)

var toolTable = map[ToolStatus]map[ToolEvent]ToolStatus{
	ToolPrepared: {TevNeedApproval: ToolApproval, TevStart: ToolStarted, TevAnswer: ToolCompleted},
	ToolApproval: {TevApprove: ToolPrepared, TevDecline: ToolCompleted},
	ToolStarted: {
		TevStart: ToolStarted, TevReturn: ToolRawCompleted, TevAnswer: ToolCompleted,
		TevUnknown: ToolUncertain, TevRetry: ToolStarted, TevNeedApproval: ToolApproval,
		TevResolveRetry: ToolPrepared, TevResolveValue: ToolRawCompleted,
	},
	ToolUncertain:    {TevResolveRetry: ToolPrepared, TevResolveValue: ToolRawCompleted},
	ToolRawCompleted: {TevProcess: ToolCompleted},
	ToolCompleted:    {},
}

// NextToolStatus returns the entry status after an event, or an error for
// an illegal pair.
func NextToolStatus(s ToolStatus, e ToolEvent) (ToolStatus, error) {
	if n, ok := toolTable[s][e]; ok {
		return n, nil
	}
	return "", fmt.Errorf("illegal tool transition: %s on %s", s, e)
}

// ResumeAction is what resume does with a tool entry found after a crash.
type ResumeAction string

// Resume actions (REFERENCE §4.3).
const (
	ResumeExecute   ResumeAction = "execute"   // intent saved or retryable: run (again)
	ResumeUncertain ResumeAction = "uncertain" // manual tool dispatched without a result: ask
	ResumeProcess   ResumeAction = "process"   // raw result committed: redo only processing
	ResumeNothing   ResumeAction = "nothing"   // completed
	ResumeWait      ResumeAction = "wait"      // approval or uncertain: wait for a decision
)

// ResumeTable decides per entry status and replay policy.
func ResumeTable(s ToolStatus, policy string) ResumeAction {
	switch s {
	case ToolPrepared:
		return ResumeExecute
	case ToolStarted:
		if policy == "safe" || policy == "idempotent" {
			return ResumeExecute
		}
		return ResumeUncertain
	case ToolRawCompleted:
		return ResumeProcess
	case ToolCompleted:
		return ResumeNothing
	default:
		return ResumeWait
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
