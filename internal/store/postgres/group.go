package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"hxd/internal/runtime/rtstore"
)

// commitReq is one Commit waiting for, or taking part in, a group.
//
// It keeps no context: its caller's ctx bounds only the caller's wait.
// Commit withdraws a boundary whose ctx ends while it is still queued (it
// is never written) and waits for the outcome of one a group already
// took; the group bounds its transaction by deadline alone.
type commitReq struct {
	// deadline is the caller's ctx's deadline (zero: none).
	deadline time.Time
	c        *rtstore.Commit
	l        *lease // nil for an unleased commit
	op       string
	cached   runSeqs // the run's seqs from the cache (-1 when unknown)
	// pre and prePlan are the fast path's work and plan, made by Commit
	// from cached before the boundary queues (nil when the seqs are
	// unknown or the commit is invalid): encoding the records and events
	// is then done by each caller in parallel, not by the group in turn.
	pre     *commitWork
	prePlan *commitPlan

	// Set by the group before done closes.
	err  error
	plan *commitPlan
	done chan struct{}
	// control is the session's control flag as the transaction read it,
	// when it started at ctlAt (zero: not read).
	control string
	ctlAt   time.Time
}

// committer groups concurrent Commits into shared transactions (group
// commit). A Commit that arrives while no group is in flight starts one at
// once (a group of one: no added latency); otherwise it queues. A further
// group (up to maxGroups in flight) starts only once minExtraGroup
// boundaries wait, and a group that ends starts the next with whatever
// queued meanwhile: commits are CPU-bound on the database (every boundary
// writes some 9 rows with their index entries and JSON checks), so
// fewer, larger groups do less work per boundary than many small ones,
// while two in flight still overlap one's execution with the other's WAL
// flush. Each group takes up to maxSize queued boundaries, at most one per
// session (and run), in arrival order.
// Boundaries of one session therefore commit one after the other, in
// order. A group whose transaction fails as a whole is split: every
// boundary is retried alone, so each gets its own outcome.
type committer struct {
	s         *Store
	maxGroups int
	maxSize   int
	ungrouped atomic.Bool // every boundary commits alone, on its caller's goroutine
	minExtra  int         // boundaries waiting before a further group starts (minExtraGroup)

	groupCount, boundaryCount atomic.Int64 // transactions and boundaries committed (stats)
	fastMisses                atomic.Int64 // one-round-trip attempts that fell back (stats)

	mu     sync.Mutex
	queue  []*commitReq
	busy   map[string]bool // sessions and runs with a boundary in a group in flight
	groups int             // groups in flight
	closed bool
	wg     sync.WaitGroup
}

// minExtraGroup is how many boundaries must be waiting before a group
// starts while another is in flight (the default of committer.minExtra).
const minExtraGroup = 8

// maxGroupSize bounds a group transaction's size.
const maxGroupSize = 64

// newCommitter returns the committer of a pool of poolSize connections
// running at most groups group transactions at once (at most half the
// pool, at least one).
func newCommitter(s *Store, poolSize, groups int) *committer {
	return &committer{
		s:         s,
		maxGroups: max(1, min(groups, poolSize/2)),
		maxSize:   maxGroupSize,
		minExtra:  minExtraGroup,
		busy:      make(map[string]bool),
	}
}

// submit queues r and starts a group when one may start.
func (g *committer) submit(r *commitReq) {
	g.mu.Lock()
	if g.ungrouped.Load() && !g.closed {
		g.wg.Add(1)
		g.mu.Unlock()
		defer g.wg.Done()
		defer close(r.done)
		g.s.commitGroup([]*commitReq{r})
		return
	}
	if g.closed {
		g.mu.Unlock()
		r.err = fmt.Errorf("%s: %w: store closed", r.op, rtstore.ErrUnavailable)
		close(r.done)
		return
	}
	g.queue = append(g.queue, r)
	var batch []*commitReq
	if g.groups == 0 || (g.groups < g.maxGroups && len(g.queue) >= g.minExtra) {
		if batch = g.takeLocked(); len(batch) > 0 {
			g.groups++
			g.wg.Add(1)
		}
	}
	g.mu.Unlock()
	if len(batch) > 0 {
		go g.run(batch)
	}
}

// withdraw removes r from the queue; false when a group already took it.
func (g *committer) withdraw(r *commitReq) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.queue {
		if q == r {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			return true
		}
	}
	return false
}

// sessionKey and runKey name a boundary's session and run in busy.
func sessionKey(r *commitReq) string { return "s:" + r.c.SessionID }
func runKey(r *commitReq) string     { return "r:" + r.c.RunID }

// takeLocked takes the next group from the queue: up to maxSize boundaries
// of sessions (and runs) not in flight, one per session and run, in
// arrival order. The caller holds mu.
func (g *committer) takeLocked() []*commitReq {
	var batch []*commitReq
	rest := g.queue[:0]
	for _, r := range g.queue {
		if len(batch) < g.maxSize && !g.busy[sessionKey(r)] && !g.busy[runKey(r)] {
			g.busy[sessionKey(r)], g.busy[runKey(r)] = true, true
			batch = append(batch, r)
			continue
		}
		rest = append(rest, r)
	}
	clear(g.queue[len(rest):])
	g.queue = rest
	return batch
}

// run commits batch, then further groups while the queue has work.
func (g *committer) run(batch []*commitReq) {
	defer g.wg.Done()
	for {
		g.s.commitGroup(batch)
		g.mu.Lock()
		for _, r := range batch {
			delete(g.busy, sessionKey(r))
			delete(g.busy, runKey(r))
		}
		next := g.takeLocked()
		if len(next) == 0 {
			g.groups--
		}
		g.mu.Unlock()
		for _, r := range batch {
			close(r.done)
		}
		if len(next) == 0 {
			return
		}
		batch = next
	}
}

// close refuses new boundaries and waits for the groups in flight.
func (g *committer) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// groupContext bounds a group's transaction: the latest deadline of its
// boundaries' contexts, at most opTimeout. Cancelling one caller does not
// cancel the others' writes.
func groupContext(batch []*commitReq) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(opTimeout)
	latest := time.Time{}
	for _, r := range batch {
		if r.deadline.IsZero() {
			latest = deadline
			break
		}
		if r.deadline.After(latest) {
			latest = r.deadline
		}
	}
	if latest.After(deadline) {
		latest = deadline
	}
	return context.WithDeadline(context.Background(), latest)
}

// commitGroup commits batch in one transaction and records each boundary's
// outcome in it (err or plan; cache, cursors and notification on
// success). When the transaction fails as a whole, a group of several is
// split and each boundary is committed alone.
func (s *Store) commitGroup(batch []*commitReq) {
	ctx, cancel := groupContext(batch)
	defer cancel()
	op := "group commit"
	if len(batch) == 1 {
		op = batch[0].op
	}
	var err error
	fast := fastPath(batch)
	if fast {
		// One statement; when the optimism fails (the lease is gone, a
		// re-sent id, a stale cached seq) nothing was written and the
		// boundaries go the careful way, which gives each its outcome.
		missed := false
		err = s.withTx(ctx, op, func(ctx context.Context, t *tx) error {
			missed = false
			err := s.applyFast(ctx, t, batch)
			if isFastMiss(err) {
				missed = true
			}
			return err
		})
		if missed {
			s.group.fastMisses.Add(1)
			for _, r := range batch {
				r.err, r.plan, r.cached = nil, nil, unknownSeqs
			}
			fast = false
		}
	}
	if !fast {
		err = s.withTx(ctx, op, func(ctx context.Context, t *tx) error {
			return s.applyGroup(ctx, t, batch)
		})
	}
	if err == nil {
		s.group.groupCount.Add(1)
		s.group.boundaryCount.Add(int64(len(batch)))
	}
	if err != nil && len(batch) > 1 {
		s.logger.DebugContext(ctx, "group commit failed; committing its boundaries one by one",
			"boundaries", len(batch), "error", err)
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() { s.commitGroup([]*commitReq{r}) })
		}
		wg.Wait()
		return
	}
	for _, r := range batch {
		switch {
		case err != nil:
			r.err = err
		case r.err == nil && r.c.DeltaOnly && !r.plan.last.lastRun:
			// A delta-only commit does not point the session at the run:
			// what the cache knew stays unknown.
			s.seqs.Forget(r.c.RunID)
			setCursors(r.c, r.plan.cursors)
			if len(r.plan.events.seq) > 0 {
				s.notify.add(r.c.RunID)
			}
		case r.err == nil:
			s.seqs.put(r.c, r.plan.last)
			if r.l != nil && !r.ctlAt.IsZero() {
				s.ctl.put(r.c.SessionID, r.control, r.ctlAt)
			}
			setCursors(r.c, r.plan.cursors)
			if len(r.plan.events.seq) > 0 {
				s.notify.add(r.c.RunID)
			}
		}
	}
}

// GroupCommitStats reports how many write transactions Commit ran and how
// many boundaries they carried (failed boundaries included), since Open:
// boundaries/groups is the average group size. For metrics and benchmarks.
func (s *Store) GroupCommitStats() (groups, boundaries int64) {
	return s.group.groupCount.Load(), s.group.boundaryCount.Load()
}

// errGroupSplit fails a group transaction whose appends collided: the group
// is split and every boundary retried alone.
var errGroupSplit = errors.New("group appends collided")

// applyGroup writes batch in t (one attempt). Boundaries that fail on
// their own (lease, validation, unknown run, record conflict) get their
// error in r.err and write nothing; the others commit together.
func (s *Store) applyGroup(ctx context.Context, t *tx, batch []*commitReq) error {
	ts := now()
	works := make([]*commitWork, len(batch))
	invalid := make([]error, len(batch))
	var (
		sessionIDs, runSessions, runIDs []string
		ownerPtrs                       []*string
		gens                            []int64
		needJournal, needEvents         []string
		recordIDs, eventIDs             []string
	)
	byRun := make(map[string]*commitWork, len(batch))
	for i, r := range batch {
		r.err, r.plan = nil, nil
		w := newCommitWork(r.c, ts, r.cached)
		works[i] = w
		byRun[r.c.RunID] = w
		invalid[i] = validateCommit(r.c)
		var owner *string
		var gen int64
		if r.l != nil {
			owner, gen = &r.l.token, r.l.gen
		}
		sessionIDs, ownerPtrs, gens = append(sessionIDs, r.c.SessionID), append(ownerPtrs, owner), append(gens, gen)
		runIDs, runSessions = append(runIDs, r.c.RunID), append(runSessions, r.c.SessionID)
		if invalid[i] != nil {
			continue
		}
		recs, evs := w.ids()
		recordIDs, eventIDs = append(recordIDs, recs...), append(eventIDs, evs...)
		// Both seqs are read when unknown, even without records or
		// events, so that the cache is whole again and the run's next
		// boundary can take the fast path.
		if w.seq.journal < 0 {
			needJournal = append(needJournal, r.c.RunID)
		}
		if w.seq.event < 0 {
			needEvents = append(needEvents, r.c.RunID)
		}
	}
	// A retry must not trust what the failed attempt cached.
	for _, r := range batch {
		r.cached = unknownSeqs
	}

	// Round trip 1: begin, fence, and what the plans need.
	fenced := make(map[string]bool, len(batch))
	found := make(map[string]bool, len(batch))
	var known map[string][]byte
	var knownEvents map[string]storedEvent
	b := &pgx.Batch{}
	controls := make(map[string]string, len(batch))
	readAt := time.Now()
	b.Queue(sqlGroupFence, sessionIDs, ownerPtrs, gens).Query(func(rows pgx.Rows) error {
		var id, control string
		_, err := pgx.ForEachRow(rows, []any{&id, &control}, func() error {
			fenced[id], controls[id] = true, control
			return nil
		})
		return err
	})
	b.Queue(sqlGroupRuns, runIDs, runSessions).Query(func(rows pgx.Rows) error {
		var id string
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error { found[id] = true; return nil })
		return err
	})
	maxSeqs := func(ids []string, sql string, set func(w *commitWork, seq int64)) {
		if len(ids) == 0 {
			return
		}
		for _, id := range ids {
			set(byRun[id], 0) // no row: no journal (events) yet
		}
		b.Queue(sql, ids).Query(func(rows pgx.Rows) error {
			var id string
			var seq int64
			_, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
				set(byRun[id], seq)
				return nil
			})
			return err
		})
	}
	maxSeqs(needJournal, sqlGroupJournalMax, func(w *commitWork, seq int64) { w.seq.journal = seq })
	maxSeqs(needEvents, sqlGroupEventMax, func(w *commitWork, seq int64) { w.seq.event = seq })
	queueKnown(b, recordIDs, eventIDs, &known, &knownEvents)
	if err := t.send(ctx, b, false); err != nil {
		return err
	}

	// Each boundary's own outcome.
	var ws writeSet
	n := 0
	for i, r := range batch {
		c, w := r.c, works[i]
		switch {
		case !fenced[c.SessionID] && r.l != nil:
			r.err = fmt.Errorf("%s: session %s: %w: lease expired or was superseded", r.op, c.SessionID, rtstore.ErrLeaseLost)
			continue
		case invalid[i] != nil:
			r.err = fmt.Errorf("%s: %w", r.op, invalid[i])
			continue
		case !fenced[c.SessionID] || !found[c.RunID]:
			r.err = fmt.Errorf("%s: run %s of session %s: %w", r.op, c.RunID, c.SessionID, rtstore.ErrNotFound)
			continue
		}
		w.known, w.knownEvents = known, knownEvents
		plan, err := w.plan()
		if err != nil {
			r.err = fmt.Errorf("%s: %w", r.op, err)
			continue
		}
		r.plan = plan
		r.control, r.ctlAt = controls[c.SessionID], readAt
		ws.addBoundary(w, plan, true, !w.seq.lastRun)
		n++
	}
	if n == 0 {
		return nil // nothing to write: the transaction rolls back
	}

	// Round trip 2: every write, then commit.
	collided := errGroupSplit
	if len(batch) == 1 {
		collided = errRetry
	}
	b = &pgx.Batch{}
	ws.queue(b, collided)
	return t.send(ctx, b, true)
}

// Fast path: a group whose every boundary is leased and knows its run's
// last journal and event seqs (the seq cache, warm from the lease's
// previous commit) commits in ONE statement sent on its own, a call of the
// schema's hxd_commit function (migration 0002): an implicit transaction
// that fences the sessions, writes every row and reads the control flags
// (the notifier NOTIFYs the runs whose events it appended, after the
// commit: see notifier). Every check runs on the
// server and fails the call there: a session not held by its lease or a
// run missing from its session raises SQLSTATE HX001
// (codeFastMiss), and the appends are plain INSERTs, which a re-sent
// record or event id, or a seq taken by a writer bypassing the lease,
// fails with a unique violation. Either is a "fast miss": nothing was
// written, and the group is committed again the careful way (applyGroup:
// reads first, each boundary its own outcome).
const sqlFastCommit = `SELECT o_session, o_control FROM hxd_commit(
$1::text[], $2::text[], $3::bigint[],
$4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[],
$10::text[], $11::text[],
$12::text[], $13::text[],
$14::text[], $15::text[], $16::text[],
$17::text[], $18::text[], $19::text[],
$20::text[], $21::text[], $22::text[],
$23::text[], $24::bigint[], $25::text[], $26::text[],
$27::text[], $28::bigint[], $29::text[], $30::text[])`

// fastPath reports whether batch may try the one-statement commit: every
// boundary leased, with both seqs of its run cached, and none setting a
// trace context (hxd_commit does not write it; a resume's commit is rare).
func fastPath(batch []*commitReq) bool {
	for _, r := range batch {
		if r.l == nil || r.cached.journal < 0 || r.cached.event < 0 || r.c.TraceContext != "" {
			return false
		}
	}
	return true
}

// errFastMiss is a fast attempt that must be redone by applyGroup.
var errFastMiss = errors.New("fast commit missed")

// isFastMiss reports the failures of a fast attempt that the careful path
// sorts out: hxd_commit's HX001 (a fence or run check), or a unique
// violation of an append.
func isFastMiss(err error) bool {
	if errors.Is(err, errFastMiss) {
		return true
	}
	code := sqlState(err)
	return code == codeFastMiss || code == codeUniqueViolation
}

// applyFast writes batch on t's connection with one hxd_commit call (see
// fastPath). A boundary that fails before any database work (validation,
// a record conflict inside the commit) makes it a miss at once: applyGroup
// gives every boundary its outcome in the usual order.
func (s *Store) applyFast(ctx context.Context, t *tx, batch []*commitReq) error {
	ts := now()
	var (
		ws                 writeSet
		sessionIDs, owners []string
		gens               []int64
	)
	for _, r := range batch {
		r.err, r.plan = nil, nil
		if validateCommit(r.c) != nil {
			return errFastMiss // applyGroup reports it (after the fence, as SQLite does)
		}
		w, plan := r.pre, r.prePlan
		if plan == nil {
			w = newCommitWork(r.c, ts, r.cached)
			var err error
			if plan, err = w.plan(); err != nil {
				return errFastMiss
			}
		}
		r.plan = plan
		sessionIDs, owners, gens = append(sessionIDs, r.c.SessionID), append(owners, r.l.token), append(gens, r.l.gen)
		ws.addBoundary(w, plan, true, !w.seq.lastRun)
	}
	controls := make(map[string]string)
	readAt := time.Now()
	rows, err := t.conn.Query(ctx, sqlFastCommit,
		sessionIDs, owners, gens,
		ws.runID, ws.runSession, ws.runStatus, ws.runPhase, nullableStrings(ws.runPayload), ws.runUpdated,
		ws.lastSession, ws.lastRun,
		ws.snapSession, ws.snapPayload,
		ws.stepRun, ws.stepID, ws.stepPayload,
		ws.appRun, ws.appKey, ws.appPayload,
		ws.outRun, ws.outKey, ws.outPayload,
		ws.journal.run, ws.journal.seq, ws.journal.id, ws.journal.payload,
		ws.events.run, ws.events.seq, ws.events.id, ws.events.payload)
	if err != nil {
		return err
	}
	var id, control string
	if _, err := pgx.ForEachRow(rows, []any{&id, &control}, func() error {
		controls[id] = control
		return nil
	}); err != nil {
		return err
	}
	for _, r := range batch {
		r.control, r.ctlAt = controls[r.c.SessionID], readAt
	}
	return nil
}
