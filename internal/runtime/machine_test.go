package runtime

import (
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/tool"
)

func TestNextPhase(t *testing.T) {
	t.Parallel()
	legal := map[Phase]map[Outcome]Phase{
		PhaseStart:        {OutStarted: PhasePrepareModel},
		PhasePrepareModel: {OutReady: PhaseModel, OutIterationLimit: PhaseFinish},
		PhaseModel:        {OutToolCalls: PhasePrepareTools, OutFinal: PhaseFinish},
		PhasePrepareTools: {OutPrepared: PhaseTools},
		PhaseTools:        {OutCollected: PhasePrepareModel},
		PhaseFinish:       {OutFinished: PhaseResult},
		PhaseResult:       {},
	}
	outcomes := []Outcome{OutStarted, OutReady, OutIterationLimit, OutToolCalls, OutFinal, OutPrepared, OutCollected, OutFinished}
	for from, row := range legal {
		for _, o := range outcomes {
			got, err := NextPhase(from, o)
			if want, ok := row[o]; ok {
				require.NoError(t, err, "%s on %s", from, o)
				require.Equal(t, want, got, "%s on %s", from, o)
			} else {
				require.Error(t, err, "%s on %s must be illegal", from, o)
			}
		}
	}
}

func TestNextStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		from RunStatus
		ev   StatusEvent
		want RunStatus // "" = illegal
	}{
		{"running completes", StatusRunning, EvComplete, StatusCompleted},
		{"running pauses", StatusRunning, EvPause, StatusPaused},
		{"running awaits input", StatusRunning, EvAwait, StatusAwaitingInput},
		{"running is cancelled", StatusRunning, EvCancel, StatusCancelled},
		{"running fails", StatusRunning, EvFail, StatusFailed},
		{"crashed running resumes", StatusRunning, EvResume, StatusRunning},
		{"paused resumes", StatusPaused, EvResume, StatusRunning},
		{"paused is cancelled", StatusPaused, EvCancel, StatusCancelled},
		{"paused cannot complete", StatusPaused, EvComplete, ""},
		{"awaiting resumes", StatusAwaitingInput, EvResume, StatusRunning},
		{"awaiting is cancelled", StatusAwaitingInput, EvCancel, StatusCancelled},
		{"awaiting cannot fail", StatusAwaitingInput, EvFail, ""},
		{"failed resumes", StatusFailed, EvResume, StatusRunning},
		{"failed is cancelled", StatusFailed, EvCancel, StatusCancelled},
		{"failed cannot pause", StatusFailed, EvPause, ""},
		{"completed is final", StatusCompleted, EvResume, ""},
		{"completed cannot cancel", StatusCompleted, EvCancel, ""},
		{"cancelled is final", StatusCancelled, EvResume, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NextStatus(tt.from, tt.ev)
			if tt.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestNextToolStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		from ToolStatus
		ev   ToolEvent
		want ToolStatus
	}{
		{"prepared starts", ToolPrepared, TevStart, ToolStarted},
		{"prepared needs approval", ToolPrepared, TevNeedApproval, ToolApproval},
		{"prepared answered without dispatch", ToolPrepared, TevAnswer, ToolCompleted},
		{"prepared cannot return", ToolPrepared, TevReturn, ""},
		{"approval approved", ToolApproval, TevApprove, ToolPrepared},
		{"approval declined", ToolApproval, TevDecline, ToolCompleted},
		{"approval cannot start", ToolApproval, TevStart, ""},
		{"started returns", ToolStarted, TevReturn, ToolRawCompleted},
		{"started outcome unknown", ToolStarted, TevUnknown, ToolUncertain},
		{"started retried", ToolStarted, TevRetry, ToolStarted},
		{"started restarted after crash", ToolStarted, TevStart, ToolStarted},
		{"started resolved retry", ToolStarted, TevResolveRetry, ToolPrepared},
		{"started resolved value", ToolStarted, TevResolveValue, ToolRawCompleted},
		{"started cannot process", ToolStarted, TevProcess, ""},
		{"uncertain resolved retry", ToolUncertain, TevResolveRetry, ToolPrepared},
		{"uncertain resolved value", ToolUncertain, TevResolveValue, ToolRawCompleted},
		{"uncertain cannot start", ToolUncertain, TevStart, ""},
		{"uncertain cannot be approved", ToolUncertain, TevApprove, ""},
		{"raw completed processed", ToolRawCompleted, TevProcess, ToolCompleted},
		{"raw completed never re-run", ToolRawCompleted, TevStart, ""},
		{"completed is final", ToolCompleted, TevStart, ""},
		{"completed cannot be resolved", ToolCompleted, TevResolveValue, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := NextToolStatus(tt.from, tt.ev)
			if tt.want == "" {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestResumeTable asserts REFERENCE §4.3 row by row.
func TestResumeTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status ToolStatus
		policy string
		want   ResumeAction
	}{
		{"intent saved executes", ToolPrepared, "manual", ResumeExecute},
		{"dispatched manual becomes uncertain", ToolStarted, "manual", ResumeUncertain},
		{"dispatched safe runs again", ToolStarted, "safe", ResumeExecute},
		{"dispatched idempotent runs again", ToolStarted, "idempotent", ResumeExecute},
		{"raw result only reprocessed", ToolRawCompleted, "manual", ResumeProcess},
		{"raw result safe only reprocessed", ToolRawCompleted, "safe", ResumeProcess},
		{"completed nothing", ToolCompleted, "safe", ResumeNothing},
		{"approval waits", ToolApproval, "manual", ResumeWait},
		{"uncertain waits", ToolUncertain, "safe", ResumeWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, ResumeTable(tt.status, tt.policy))
		})
	}
}

func TestNextCommand(t *testing.T) {
	t.Parallel()
	for _, s := range []RunStatus{StatusCompleted, StatusPaused, StatusAwaitingInput, StatusCancelled, StatusFailed} {
		require.Equal(t, CommandResult, NextCommand(&RunState{Status: s, Phase: PhaseModel}), s)
	}
	require.Equal(t, Command(PhaseTools), NextCommand(&RunState{Status: StatusRunning, Phase: PhaseTools}))
}

func TestConcurrentBatch(t *testing.T) {
	entry := func(concurrent bool, status ToolStatus) ToolEntry {
		return ToolEntry{Concurrent: concurrent, Status: status}
	}
	for _, tc := range []struct {
		name  string
		tools []ToolEntry
		want  bool
	}{
		{"empty", nil, false},
		{"one call", []ToolEntry{entry(true, ToolPrepared)}, false},
		{"two prepared", []ToolEntry{entry(true, ToolPrepared), entry(true, ToolPrepared)}, true},
		{"started to run again", []ToolEntry{entry(true, ToolStarted), entry(true, ToolPrepared)}, true},
		{"one not concurrent", []ToolEntry{entry(true, ToolPrepared), entry(false, ToolPrepared), entry(true, ToolPrepared)}, false},
		{"a finished entry not concurrent", []ToolEntry{entry(false, ToolCompleted), entry(true, ToolPrepared), entry(true, ToolPrepared)}, false},
		{"one call left", []ToolEntry{entry(true, ToolCompleted), entry(true, ToolRawCompleted), entry(true, ToolPrepared)}, false},
		{"awaiting approval", []ToolEntry{entry(true, ToolApproval), entry(true, ToolPrepared)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ConcurrentBatch(tc.tools); got != tc.want {
				t.Fatalf("ConcurrentBatch = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestToolFailureAction: what a failed attempt leads to, by replay policy,
// retry budget and failure (REFERENCE §4.2 steps 3–4).
func TestToolFailureAction(t *testing.T) {
	t.Parallel()
	var (
		declared = &tool.Failure{Type: "TransientToolError", Transient: true}             // 429/5xx, a dial failure
		timeout  = &tool.Failure{Type: "TimeoutError", Transient: true, MayHaveRun: true} // or a cut connection
		plain    = &tool.Failure{Type: "ToolError"}                                       // any other exception
	)
	two := &tool.Retry{Attempts: 2}
	tests := []struct {
		policy  string
		attempt int
		f       *tool.Failure
		want    FailureAction
	}{
		{tool.PolicyManual, 1, declared, FailErrorResult},
		{tool.PolicyManual, 1, timeout, FailUncertain},
		{tool.PolicyManual, 1, plain, FailUncertain},
		{tool.PolicySafe, 1, declared, FailRetry},
		{tool.PolicySafe, 1, timeout, FailRetry},
		{tool.PolicySafe, 1, plain, FailRetry},
		{tool.PolicySafe, 2, declared, FailErrorResult},
		{tool.PolicySafe, 2, timeout, FailErrorResult},
		{tool.PolicySafe, 2, plain, FailRun},
		{tool.PolicyIdempotent, 1, timeout, FailRetry},
		{tool.PolicyIdempotent, 2, plain, FailRun},
	}
	for _, tt := range tests {
		e := &ToolEntry{Policy: tt.policy, Attempt: tt.attempt, Retry: two}
		require.Equal(t, tt.want, ToolFailureAction(e, tt.f), "%s attempt %d %s", tt.policy, tt.attempt, tt.f.Type)
	}
}
