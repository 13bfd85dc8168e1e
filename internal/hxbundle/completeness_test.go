package hxbundle

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// removeKinds drops the records of the kinds (all of them, or only those
// of one step when step is set) and renumbers.
func removeKinds(b *bundle, step string, kinds ...string) {
	b.records = slices.DeleteFunc(b.records, func(r map[string]any) bool {
		return slices.Contains(kinds, r["kind"].(string)) && (step == "" || r["step_id"] == step)
	})
	b.renumber()
}

// replaceRecord replaces the first record of a kind by others, then
// renumbers.
func replaceRecord(b *bundle, kind string, with ...map[string]any) {
	i := slices.IndexFunc(b.records, func(r map[string]any) bool { return r["kind"] == kind })
	b.records = slices.Replace(b.records, i, i+1, with...)
	b.renumber()
}

// awaiting makes the run stop on an uncertain tool outcome: the manifest
// and the last checkpoint agree on it.
func awaiting(b *bundle, status string) {
	b.manifest["status"] = "awaiting_input"
	b.manifest["unresolved_operations"] = []any{map[string]any{"execution_key": tToolKey, "status": status, "attempt": 1}}
	cp := b.last("checkpoint")["payload"].(map[string]any)
	cp["status"] = "awaiting_input"
	cp["tools"] = []any{map[string]any{"execution_key": tToolKey, "status": status, "attempt": 1, "approved": true}}
}

func TestCompleteness(t *testing.T) {
	t.Parallel()
	toolKey := tToolKey
	tests := []struct {
		name string
		edit func(b *bundle)
		want []string
		// details checks one detail per issue, when set.
		details map[string]Detail
	}{
		{name: "complete", want: []string{}},
		{name: "metadata only (item 31)", edit: func(b *bundle) { b.metadataOnly() },
			want: []string{IssuePayloadsOmittedOrRedacted}},
		{name: "no records", edit: func(b *bundle) {
			b.records = nil
			b.manifest["artifacts"] = map[string]any{}
			b.artifacts = nil
			b.renumber()
		}, want: []string{IssueInitialRunRecordMissing, IssueCheckpointMissing}},
		{name: "first record not run.started", edit: func(b *bundle) { removeKinds(b, "", "run.started") },
			want:    []string{IssueInitialRunRecordMissing},
			details: map[string]Detail{IssueInitialRunRecordMissing: {Member: memberRecords, Seq: 1, Kind: "checkpoint"}}},
		{name: "a redacted payload", edit: func(b *bundle) {
			b.records[3]["capture"] = "redacted"
			b.records[3]["payload"] = "[REDACTED]"
		}, want: []string{IssuePayloadsOmittedOrRedacted},
			details: map[string]Detail{IssuePayloadsOmittedOrRedacted: {Member: memberRecords, Seq: 4}}},
		{name: "artifact omitted by policy (item 38)", edit: func(b *bundle) {
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "omitted", "reason": "export_policy"}}
			b.artifacts = nil
		}, want: []string{IssueArtifactsUnavailable},
			details: map[string]Detail{IssueArtifactsUnavailable: {Member: artifactPrefix + artKey}}},
		{name: "artifact missing and corrupt (item 39)", edit: func(b *bundle) {
			other := sha([]byte("other"))
			b.records[10]["payload"].(map[string]any)["content"] = "artifact://" + artKey + " and artifact://" + other
			b.manifest["artifacts"] = map[string]any{
				artKey: map[string]any{"status": "missing", "reason": "artifact_unavailable"},
				other:  map[string]any{"status": "corrupt", "reason": "artifact_checksum"},
			}
			b.artifacts = nil
		}, want: []string{IssueArtifactsUnavailable}},
		{name: "run still running", edit: func(b *bundle) {
			b.manifest["status"] = "running"
			b.last("checkpoint")["payload"].(map[string]any)["status"] = "running"
		}, want: []string{IssueRunNotTerminalAtExport}},
		{name: "unresolved tool outcome (item 60)", edit: func(b *bundle) { awaiting(b, "uncertain") },
			want:    []string{IssueRunNotTerminalAtExport, IssueUnresolvedToolOutcome},
			details: map[string]Detail{IssueUnresolvedToolOutcome: {Member: memberManifest, ExecutionKey: toolKey, AttemptID: "1"}}},
		{name: "unresolved attempt true equals 1", edit: func(b *bundle) {
			awaiting(b, "uncertain")
			b.last("checkpoint")["payload"].(map[string]any)["tools"].([]any)[0].(map[string]any)["attempt"] = true
		}, want: []string{IssueRunNotTerminalAtExport, IssueUnresolvedToolOutcome}},
		{name: "unresolved operations compare with Python equality", edit: func(b *bundle) {
			awaiting(b, "started")
			// 1.0 == 1 in Python; so is True.
			b.last("checkpoint")["payload"].(map[string]any)["tools"].([]any)[0].(map[string]any)["attempt"] = json.Number("1.0")
		}, want: []string{IssueRunNotTerminalAtExport, IssueUnresolvedToolOutcome}},
		{name: "no checkpoint", edit: func(b *bundle) { removeKinds(b, "", "checkpoint") },
			want: []string{IssueCheckpointMissing}},
		{name: "omitted checkpoints still count", edit: func(b *bundle) {
			for _, r := range b.records {
				if r["kind"] == "checkpoint" {
					r["payload"], r["capture"] = nil, "omitted"
				}
			}
		}, want: []string{IssuePayloadsOmittedOrRedacted}},
		{name: "model.response removed (item 58)", edit: func(b *bundle) { removeKinds(b, "2", "model.response") },
			want:    []string{IssueModelBoundariesMissing},
			details: map[string]Detail{IssueModelBoundariesMissing: {Member: memberRecords, Seq: 16, Kind: "model.processed", StepID: "2", AttemptID: "1"}}},
		{name: "model.started removed", edit: func(b *bundle) { removeKinds(b, "1", "model.started") },
			want: []string{IssueModelBoundariesMissing}},
		{name: "tool.started removed", edit: func(b *bundle) { removeKinds(b, "", "tool.started") },
			want:    []string{IssueToolBoundariesMissing},
			details: map[string]Detail{IssueToolBoundariesMissing: {Member: memberRecords, Seq: 9, Kind: "tool.dispatched", StepID: "1", ExecutionKey: toolKey, AttemptID: "1"}}},
		{name: "tool.returned removed", edit: func(b *bundle) { removeKinds(b, "", "tool.returned") },
			want: []string{IssueToolBoundariesMissing, IssueToolAttemptOutcomeUnresolved}},
		{name: "both gaps, sorted", edit: func(b *bundle) { removeKinds(b, "", "tool.started", "model.processed") },
			want: []string{IssueModelBoundariesMissing, IssueToolBoundariesMissing}},
		{name: "model attempt not completed", edit: func(b *bundle) { removeKinds(b, "2", "model.completed") },
			want:    []string{IssueModelAttemptIncomplete},
			details: map[string]Detail{IssueModelAttemptIncomplete: {Member: memberRecords, Seq: 15, Kind: "model.started", StepID: "2", AttemptID: "1"}}},
		{name: "model.interrupted does not close (12.5)", edit: func(b *bundle) {
			i := slices.IndexFunc(b.records, func(r map[string]any) bool { return r["kind"] == "model.completed" && r["step_id"] == "2" })
			b.records[i] = rec(0, "model.interrupted", "2", "1", nil, map[string]any{"outcome": "incomplete"})
			b.renumber()
		}, want: []string{IssueModelAttemptIncomplete}},
		{name: "model.failed closes (retry, item 8)", edit: func(b *bundle) {
			i := slices.IndexFunc(b.records, func(r map[string]any) bool { return r["kind"] == "model.started" && r["step_id"] == "2" })
			b.records = slices.Insert(b.records, i,
				rec(0, "model.started", "2", "1", nil, map[string]any{"model": "m"}),
				rec(0, "model.failed", "2", "1", nil, map[string]any{"type": "APIConnectionError", "message": "reset"}))
			for _, r := range b.records[i+2:] {
				if r["step_id"] == "2" {
					r["attempt_id"] = "2"
				}
			}
			b.renumber()
		}, want: []string{}},
		{name: "tool failed and retried (12.1)", edit: func(b *bundle) {
			replaceRecord(b, "tool.returned",
				rec(0, "tool.failed", "1", "1", tToolKey, map[string]any{"type": "TransientToolError", "message": "x", "outcome": "failed"}))
			removeKinds(b, "", "tool.processed")
		}, want: []string{IssueToolAttemptOutcomeUnresolved},
			details: map[string]Detail{IssueToolAttemptOutcomeUnresolved: {Member: memberRecords, Seq: 10, Kind: "tool.dispatched", ExecutionKey: toolKey, AttemptID: "1"}}},
		{name: "tool resolved with a result closes", edit: func(b *bundle) {
			replaceRecord(b, "tool.returned",
				rec(0, "tool.failed", "1", "1", tToolKey, map[string]any{"type": "OSError", "message": "x", "outcome": "unknown"}),
				rec(0, "tool.resolved", "1", "1", tToolKey, map[string]any{
					"allow": nil, "result": map[string]any{"tool_call_id": "call_1", "content": "artifact://" + artKey, "is_error": false},
					"retry": false, "abort": false, "status": "raw_completed"}))
		}, want: []string{}},
		{name: "tool resolved without a result does not close", edit: func(b *bundle) {
			replaceRecord(b, "tool.returned",
				rec(0, "tool.interrupted", "1", "1", tToolKey, map[string]any{"outcome": "unknown", "status": "uncertain"}),
				rec(0, "tool.resolved", "1", "1", tToolKey, map[string]any{
					"allow": nil, "result": nil, "retry": true, "abort": false, "status": "started"}))
			b.records[len(b.records)-10]["payload"].(map[string]any)["content"] = "artifact://" + artKey
		}, want: []string{IssueToolBoundariesMissing, IssueToolAttemptOutcomeUnresolved}},
		{name: "redacted last checkpoint skips consistency (item 37)", edit: func(b *bundle) {
			cp := b.last("checkpoint")
			cp["capture"] = "redacted"
			cp["payload"] = map[string]any{"status": "made-up", "phase": "made-up", "tools": "not a list"}
			b.manifest["status"] = "failed"
		}, want: []string{IssuePayloadsOmittedOrRedacted}},
		{name: "earlier present checkpoint is not compared", edit: func(b *bundle) {
			b.last("checkpoint")["capture"] = "omitted"
			b.last("checkpoint")["payload"] = nil
			b.manifest["status"] = "cancelled"
		}, want: []string{IssuePayloadsOmittedOrRedacted}},
		{name: "every issue, in order", edit: func(b *bundle) {
			removeKinds(b, "", "run.started", "checkpoint", "model.response", "tool.started", "tool.returned", "model.completed")
			b.records[0]["capture"], b.records[0]["payload"] = "omitted", nil
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "omitted", "reason": "export_policy"}}
			b.artifacts = nil
			b.manifest["status"] = "paused"
			b.manifest["unresolved_operations"] = []any{map[string]any{"execution_key": tToolKey, "status": "started", "attempt": 1}}
		}, want: []string{
			IssueInitialRunRecordMissing, IssuePayloadsOmittedOrRedacted, IssueArtifactsUnavailable,
			IssueRunNotTerminalAtExport, IssueUnresolvedToolOutcome, IssueCheckpointMissing,
			IssueModelBoundariesMissing, IssueToolBoundariesMissing, IssueModelAttemptIncomplete,
			IssueToolAttemptOutcomeUnresolved,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := baseBundle()
			if tt.edit != nil {
				tt.edit(b)
			}
			data := b.build(t)
			r := verifyBytes(data, DefaultLimits)
			require.True(t, r.Valid, "%+v", r)
			require.Equal(t, tt.want, r.Issues, "%+v", r.Details)
			require.Equal(t, len(tt.want) == 0, r.Complete)
			require.Equal(t, len(b.records), r.RecordCount)
			for _, issue := range tt.want {
				require.True(t, slices.ContainsFunc(r.Details, func(d Detail) bool { return d.Issue == issue }), "no detail for %s", issue)
			}
			for issue, want := range tt.details {
				i := slices.IndexFunc(r.Details, func(d Detail) bool { return d.Issue == issue })
				require.GreaterOrEqual(t, i, 0, "no detail for %s", issue)
				got := r.Details[i]
				got.Message = ""
				want.Issue = issue
				require.Equal(t, want, got)
			}
			p, err := Playback(bytes.NewReader(data), int64(len(data)), DefaultLimits)
			require.NoError(t, err)
			require.Equal(t, r, p.Report)
		})
	}
}

// TestCompletenessDetailsBounded: many incomplete attempts are listed up
// to the cap, then counted.
func TestCompletenessDetailsBounded(t *testing.T) {
	t.Parallel()
	b := baseBundle()
	for i := range 50 {
		b.records = append(b.records, rec(0, "model.started", "9", string(rune('A'+i%26))+string(rune('a'+i/26)), nil, map[string]any{}))
	}
	b.renumber()
	r := verifyBytes(b.build(t), DefaultLimits)
	require.Equal(t, []string{IssueModelAttemptIncomplete}, r.Issues)
	require.Len(t, r.Details, maxDetailsPerIssue+1)
	require.Equal(t, "30 more not listed", r.Details[maxDetailsPerIssue].Message)
	require.Equal(t, 22, r.Details[0].Seq)
}
