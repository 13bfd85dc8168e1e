package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/postgres"
)

// statementLog records the SQL of every statement sent on traced
// connections, batched ones included, with the sending backend's pid.
type statementLog struct {
	mu   sync.Mutex
	sent []sentStatement
}

type sentStatement struct {
	pid uint32
	sql string
}

func (l *statementLog) add(conn *pgx.Conn, sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, sentStatement{conn.PgConn().PID(), sql})
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(conn, d.SQL)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(_ context.Context, conn *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(conn, d.SQL)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns what was sent since the last take, leaving out the
// statements of the connections skipped (the liveness lock's) and the
// notifier's NOTIFYs, which are sent after the commit and outside it.
func (l *statementLog) take(skip ...uint32) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.sent {
		if s.sql == postgres.SQLNotifyRuns || containsPID(skip, s.pid) {
			continue
		}
		out = append(out, s.sql)
	}
	l.sent = nil
	return out
}

func containsPID(pids []uint32, pid uint32) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// TestBoundaryIsOneStatement: a leased boundary whose run's seqs are
// cached (every boundary after the run's insert, in the common case) is
// one statement sent on its own, the hxd_commit call, whatever it writes:
// fence, control read, run, step, tool rows, snapshot, journal records
// and events. (The hand-delimited transactions of the careful path send
// BEGIN, reads, writes and COMMIT.)
func TestBoundaryIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	cfg := testConfig(t)
	log := &statementLog{}
	st, err := postgres.OpenTraced(ctx, cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	b := &testBundle{store: st, cfg: cfg, tb: t}
	s, l, run := b.leasedRun(t)
	live := st.LivenessPID()

	commit := func(phase string) *rtstore.Commit {
		c := &rtstore.Commit{SessionID: s.ID, RunID: run.ID, Lease: l, Status: rtstore.StatusRunning, Phase: phase,
			State: json.RawMessage(`{"iterations":1}`), Snapshot: true,
			StepID: phase, Step: json.RawMessage(`{"n":1}`),
			Tools: []rtstore.ToolRow{
				{ExecutionKey: "k-" + phase, HasOutcome: true, Payload: json.RawMessage(`{"ok":true}`)},
				{ExecutionKey: "a-" + phase, Payload: json.RawMessage(`{"pending":true}`)},
			},
			Records: []journal.Record{record(s.ID, run.ID, journal.KindCheckpoint, `{"n":1}`)},
			Events:  []rtstore.PendingEvent{event(s.ID, run.ID, "text_delta"), event(s.ID, run.ID, "turn_complete")},
		}
		log.take(live)
		require.NoError(t, st.Commit(ctx, c))
		return c
	}
	for _, phase := range []string{"p1", "p2", "p3"} {
		commit(phase)
		require.Equal(t, []string{postgres.SQLFastCommit}, log.take(live), "boundary %s", phase)
	}
	require.Zero(t, st.FastMisses())

	// It wrote everything: 1 + 3 × (1 record + 2 events with records).
	recs, err := st.JournalList(ctx, run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1+3*3)
	for i, r := range recs {
		require.Equal(t, int64(i+1), r.Seq)
	}
	evs, err := st.EventListAfter(ctx, run.ID, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 6)
	var n int
	b.queryRow(t, `SELECT (SELECT count(*) FROM steps) + (SELECT count(*) FROM tool_outcomes) + (SELECT count(*) FROM approvals) + (SELECT count(*) FROM snapshots)`, &n)
	require.Equal(t, 3+3+3+1, n)
}

// TestCommitFunctionRaisesFastMiss: hxd_commit signals a fast-path miss
// with its own SQLSTATE, HX001, and writes nothing: for a session its
// lease no longer holds, and for a run missing from its session.
func TestCommitFunctionRaisesFastMiss(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, _, run := b.leasedRun(t)
	var owner string
	var gen int64
	b.queryRow(t, `SELECT owner, generation FROM sessions WHERE id = '`+s.ID+`'`, &owner, &gen)
	recID := "rec-" + uuid.NewString()

	call := func(owner string, gen int64, runID string) error {
		conn := adminConn(t, b.ctx(), b.cfg.Schema)
		defer func() { _ = conn.Close(context.Background()) }()
		none := []string{}
		args := []any{
			[]string{s.ID}, []string{owner}, []int64{gen}, // fence
			[]string{runID}, []string{s.ID}, []string{"running"}, []string{"fn"}, []*string{nil}, []time.Time{time.Now()}, // run
			none, none, // last run
			none, none, // snapshots
			none, none, none, // steps
			none, none, none, // approvals
			none, none, none, // tool outcomes
			[]string{run.ID}, []int64{99}, []string{recID}, []string{`{}`}, // one journal row
			none, []int64{}, none, none, // no events
		}
		_, err := conn.Exec(b.ctx(), postgres.SQLFastCommit, args...)
		return err
	}
	code := func(err error) string {
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe)
		return pe.Code
	}
	require.Equal(t, "HX001", code(call("someone-else", gen, run.ID)), "lease not held")
	require.Equal(t, "HX001", code(call(owner, gen+1, run.ID)), "superseded generation")
	require.Equal(t, "HX001", code(call(owner, gen, "run-missing")), "run missing")
	count := func() int {
		var n int
		b.queryRow(t, `SELECT (SELECT count(*) FROM journal WHERE id = '`+recID+`') + (SELECT count(*) FROM runs WHERE phase = 'fn')`, &n)
		return n
	}
	require.Zero(t, count(), "nothing written")

	// The lease holds: the same call commits the run and the record.
	require.NoError(t, call(owner, gen, run.ID))
	require.Equal(t, 2, count())
}
