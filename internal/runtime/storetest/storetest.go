package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
)

// Exercise runs the conformance suite. newStore must return a fresh, empty,
// migrated store for each call (for example one temp file or schema per
// test) and arrange its Close with t.Cleanup. Every case runs in parallel.
func Exercise(t *testing.T, newStore func(t *testing.T) rtstore.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Session", sessionCases},
		{"SessionFilter", sessionFilterCases},
		{"Run", runCases},
		{"Commit", commitCases},
		{"DeltaCommit", deltaCases},
		{"Event", eventCases},
		{"EventCreatedAt", createdCases},
		{"Artifact", artifactCases},
		{"Lock", lockCases},
		{"Snapshot", snapshotCases},
		{"Rows", rowsCases},
		{"TraceContext", traceContextCases},
		{"Retention", retentionCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, setup(t, newStore))
				})
			}
		})
	}
}

// all is a list limit larger than any list of the suite.
const all = 10_000

// testCase is one conformance case.
type testCase struct {
	name string
	fn   func(t *testing.T, b *bundle)
}

// bundle is what every case gets: a fresh store. Cases call the store
// with t.Context(), which ends with the case.
type bundle struct {
	store rtstore.Store
}

func setup(t *testing.T, newStore func(t *testing.T) rtstore.Store) *bundle {
	t.Helper()
	return &bundle{store: newStore(t)}
}

// newSession inserts a session of principal and returns it.
func (b *bundle) newSession(t *testing.T, principal string) *rtstore.SessionRow {
	t.Helper()
	s := &rtstore.SessionRow{
		ID:           "ses-" + uuid.NewString(),
		Principal:    principal,
		AgentName:    "assistant",
		AgentVersion: "1",
		AgentConfig:  json.RawMessage(`{"name":"assistant","model":"scripted"}`),
		Recording:    true,
		Metadata:     json.RawMessage(`{"team":"qa"}`),
		CreatedAt:    time.Date(2025, 1, 2, 3, 4, 5, 123456000, time.UTC),
	}
	require.NoError(t, b.store.SessionInsert(t.Context(), s))
	return s
}

// newRun starts a run of the session with a run.started record and a
// checkpoint, and returns it.
func (b *bundle) newRun(t *testing.T, sessionID string) *rtstore.RunRow {
	t.Helper()
	run, created, err := b.store.RunInsert(t.Context(), runParams(sessionID, "req-"+uuid.NewString(), "digest"))
	require.NoError(t, err)
	require.True(t, created)
	return run
}

// runParams builds RunInsertParams whose commit records run.started and a
// checkpoint.
func runParams(sessionID, requestID, digest string) *rtstore.RunInsertParams {
	runID := "run-" + uuid.NewString()
	state := json.RawMessage(fmt.Sprintf(`{"run_id":%q,"iterations":0}`, runID))
	return &rtstore.RunInsertParams{
		Run: rtstore.RunRow{
			ID: runID, SessionID: sessionID, RequestID: requestID, MessageDigest: digest,
			Status: rtstore.StatusRunning, Phase: "start", State: state,
		},
		Commit: &rtstore.Commit{
			SessionID: sessionID, RunID: runID,
			Status: rtstore.StatusRunning, Phase: "prepare_model", State: state,
			Records: []journal.Record{
				newRecord(sessionID, runID, journal.KindRunStarted, `{"input":"hello"}`),
				newRecord(sessionID, runID, journal.KindCheckpoint, `{"phase":"prepare_model"}`),
			},
		},
	}
}

// newRecord builds a journal record with a fresh id.
func newRecord(sessionID, runID string, kind journal.Kind, payload string) journal.Record {
	return journal.Record{
		Version:    1,
		ID:         uuid.NewString(),
		Kind:       kind,
		RecordedAt: journal.Timestamp(time.Now()),
		SessionID:  sessionID,
		RunID:      runID,
		StepID:     "1",
		AttemptID:  "1",
		Payload:    json.RawMessage(payload),
	}
}

// newEvent builds a pending event (with its journal record when
// withRecord) with fresh ids.
func newEvent(sessionID, runID, typ string, withRecord bool) rtstore.PendingEvent {
	pe := rtstore.PendingEvent{Event: rtstore.RunEvent{
		Type:      typ,
		Data:      json.RawMessage(`{"text":"hi <there> & you"}`),
		SessionID: sessionID,
		RunID:     runID,
		StepID:    "1",
		AttemptID: "1",
		EventID:   "evt-" + uuid.NewString(),
	}}
	if withRecord {
		r := newRecord(sessionID, runID, journal.KindEvent, "")
		r.Payload = nil // the store sets it to the event
		pe.Record = &r
	}
	return pe
}

// commitFor builds a commit of run with the given status and a state that
// names the phase.
func commitFor(run *rtstore.RunRow, status rtstore.RunStatus, phase string) *rtstore.Commit {
	return &rtstore.Commit{
		SessionID: run.SessionID,
		RunID:     run.ID,
		Status:    status,
		Phase:     phase,
		State:     json.RawMessage(fmt.Sprintf(`{"run_id":%q,"phase":%q}`, run.ID, phase)),
	}
}

// journalOf returns every record of a run.
func (b *bundle) journalOf(t *testing.T, runID string) []journal.Record {
	t.Helper()
	recs, err := b.store.JournalList(t.Context(), runID, 0, all)
	require.NoError(t, err)
	return recs
}

// eventsOf returns every event of a run.
func (b *bundle) eventsOf(t *testing.T, runID string) []rtstore.RunEvent {
	t.Helper()
	evs, err := b.store.EventListAfter(t.Context(), runID, 0, all)
	require.NoError(t, err)
	return evs
}

// requireContiguous checks that records carry seq 1..n in order.
func requireContiguous(t *testing.T, recs []journal.Record) {
	t.Helper()
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq, "record %d (%s)", i, r.Kind)
	}
}

// recordIDs lists the ids of records.
func recordIDs(recs []journal.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// kinds lists the kinds of records.
func kinds(recs []journal.Record) []journal.Kind {
	ks := make([]journal.Kind, len(recs))
	for i, r := range recs {
		ks[i] = r.Kind
	}
	return ks
}
