package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"hxd/internal/agent"
	"hxd/internal/runtime/rtstore"
)

// DefaultTombstoneFor is how long a deleted session's and run's tombstone
// is kept when GCOptions.TombstoneFor is zero (30 days).
const DefaultTombstoneFor = 720 * time.Hour

// gcBatch is how many candidates gc lists, and artifacts it deletes, per
// query or transaction when GCOptions.BatchSize is zero.
const gcBatch = 100

// ErrNoRetention: the store keeps no retention data (it does not
// implement rtstore.RetentionStore).
var ErrNoRetention = errors.New("store does not support retention")

// GCOptions configure one gc sweep (issue 23).
type GCOptions struct {
	// Store is swept; it must implement rtstore.RetentionStore. Required.
	Store Store
	// Agents gives each agent's retention (agent retention.finished_for),
	// by the session's agent name and version. Optional.
	Agents *agent.Registry
	// RetainFinishedFor is the server default: a session is deleted this
	// long after its latest run finished. Zero keeps sessions forever
	// (unless their agent or OlderThan says otherwise).
	RetainFinishedFor time.Duration
	// OlderThan, when positive, replaces both the server default and the
	// agents' policies for this sweep.
	OlderThan time.Duration
	// TombstoneFor is how long tombstones are kept, default
	// DefaultTombstoneFor.
	TombstoneFor time.Duration
	// DryRun deletes nothing and reports what a real sweep would delete
	// now: sessions, runs, records, events and bytes (measured as
	// SessionDelete counts them) and the artifacts only those sessions
	// reference. It takes no lease, so Busy stays 0 and a session that
	// gets busy meanwhile is counted. It keeps the ids of the sessions it
	// would delete in memory until the artifacts are measured.
	DryRun bool
	// BatchSize bounds each listing and artifact transaction, default 100.
	BatchSize int
	// Now, default time.Now.
	Now func() time.Time
	// AfterSessionFunc, when set, is called after each session deleted
	// (testing hook HXD_CRASH_AFTER=gc.session[:n]).
	AfterSessionFunc func()
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// GCReport says what a sweep deleted (or, dry, would delete).
type GCReport struct {
	DryRun   bool  `json:"dry_run"`
	Sessions int   `json:"sessions"`
	Runs     int   `json:"runs"`
	Events   int   `json:"events"`
	Records  int   `json:"records"`
	Bytes    int64 `json:"bytes"`
	// Artifacts and ArtifactBytes are the artifacts no record referenced
	// any more.
	Artifacts     int   `json:"artifacts"`
	ArtifactBytes int64 `json:"artifact_bytes"`
	// Busy counts sessions skipped because another process held them or
	// their latest run changed meanwhile; a later sweep takes them.
	Busy int `json:"busy"`
	// TombstonesPurged expired; Tombstones are kept after the sweep.
	TombstonesPurged int   `json:"tombstones_purged"`
	Tombstones       int64 `json:"tombstones"`
}

// GC deletes the sessions whose latest run finished (completed or
// cancelled) longer ago than their policy, one transaction per session
// taken under the session's lease as the runtime takes it, then the
// artifacts no session references, then expired tombstones; all in
// bounded batches. A session whose latest run is running, paused,
// awaiting input or failed, or that has no run, is never deleted (the
// store re-checks under the lease). It stops at the first storage error
// and returns what it did so far with it; a rerun continues.
func GC(ctx context.Context, o GCOptions) (*GCReport, error) {
	rs, ok := o.Store.(rtstore.RetentionStore)
	if !ok {
		return nil, ErrNoRetention
	}
	o = o.WithDefaults()
	rep := &GCReport{DryRun: o.DryRun}
	now := o.Now().UTC()
	var dry []string
	if shortest, ok := o.ShortestPolicy(); ok {
		if err := gcSessions(ctx, rs, o, now, now.Add(-shortest), rep, &dry); err != nil {
			return rep, err
		}
	}
	if o.DryRun {
		m, err := rs.ArtifactMeasure(ctx, dry)
		if err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
		rep.Artifacts, rep.ArtifactBytes = m.Artifacts, m.Bytes
	} else {
		for {
			swept, err := rs.ArtifactSweep(ctx, o.BatchSize)
			if err != nil {
				return rep, fmt.Errorf("gc: %w", err)
			}
			rep.Artifacts += swept.Artifacts
			rep.ArtifactBytes += swept.Bytes
			if swept.Artifacts < o.BatchSize {
				break
			}
		}
		for {
			n, err := rs.TombstonePurge(ctx, now, o.BatchSize)
			if err != nil {
				return rep, fmt.Errorf("gc: %w", err)
			}
			rep.TombstonesPurged += n
			if n < o.BatchSize {
				break
			}
		}
	}
	n, err := rs.TombstoneCount(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.Tombstones = n
	return rep, nil
}

// WithDefaults returns o with its unset Now, TombstoneFor, BatchSize and
// Logger set to their defaults (every engine's sweep starts with it).
func (o GCOptions) WithDefaults() GCOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TombstoneFor <= 0 {
		o.TombstoneFor = DefaultTombstoneFor
	}
	if o.BatchSize <= 0 {
		o.BatchSize = gcBatch
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// ShortestPolicy is the shortest retention any session may have; false
// when every session is kept forever.
func (o *GCOptions) ShortestPolicy() (time.Duration, bool) {
	if o.OlderThan > 0 {
		return o.OlderThan, true
	}
	best, found := o.RetainFinishedFor, o.RetainFinishedFor > 0
	if o.Agents != nil {
		for _, d := range o.Agents.List() {
			if v, ok := d.RetainFinishedFor(); ok && (!found || v < best) {
				best, found = v, true
			}
		}
	}
	return best, found
}

// Policy is the retention of a session of that agent; false: kept forever.
func (o *GCOptions) Policy(name, version string) (time.Duration, bool) {
	if o.OlderThan > 0 {
		return o.OlderThan, true
	}
	if o.Agents != nil {
		if d, err := o.Agents.Get(agent.Ref{Name: name, Version: version}); err == nil {
			if v, ok := d.RetainFinishedFor(); ok {
				return v, true
			}
		}
	}
	return o.RetainFinishedFor, o.RetainFinishedFor > 0
}

// gcSessions pages through the candidates that finished before the
// earliest cutoff and deletes those their own policy lets go.
// A dry run measures each one instead and appends its id to dry.
func gcSessions(ctx context.Context, rs rtstore.RetentionStore, o GCOptions, now, before time.Time, rep *GCReport, dry *[]string) error {
	p := rtstore.GCCandidateParams{FinishedBefore: before, ListParams: rtstore.ListParams{Limit: o.BatchSize}}
	for {
		page, err := rs.GCCandidates(ctx, p)
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		for _, c := range page {
			keep, ok := o.Policy(c.AgentName, c.AgentVersion)
			cutoff := now.Add(-keep)
			if !ok || !c.FinishedAt.Before(cutoff) {
				continue
			}
			if o.DryRun {
				m, err := rs.SessionMeasure(ctx, c.SessionID, cutoff)
				switch {
				case errors.Is(err, rtstore.ErrNotEligible), errors.Is(err, rtstore.ErrNotFound):
					continue // changed since listed: a real sweep would skip it too
				case err != nil:
					return fmt.Errorf("gc: %w", err)
				}
				rep.add(m)
				*dry = append(*dry, c.SessionID)
				continue
			}
			if err := gcSession(ctx, rs, o, c, cutoff, now, rep); err != nil {
				return err
			}
		}
		if len(page) < o.BatchSize {
			return nil
		}
		p.After = page[len(page)-1].Seq
	}
}

// gcSession deletes one session under its lease. A session busy, gone or
// no longer eligible is skipped.
func gcSession(ctx context.Context, rs rtstore.RetentionStore, o GCOptions, c rtstore.GCCandidate, cutoff, now time.Time, rep *GCReport) error {
	lease, err := o.Store.SessionLock(ctx, c.SessionID)
	switch {
	case errors.Is(err, rtstore.ErrSessionBusy):
		rep.Busy++
		return nil
	case errors.Is(err, rtstore.ErrNotFound):
		return nil // another sweeper was faster
	case err != nil:
		return fmt.Errorf("gc: %w", err)
	}
	defer func() {
		if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
			o.Logger.WarnContext(ctx, "gc: cannot release a session", "session_id", c.SessionID, "error", err)
		}
	}()
	del, err := rs.SessionDelete(ctx, &rtstore.SessionDeleteParams{
		SessionID: c.SessionID, Lease: lease, FinishedBefore: cutoff,
		DeletedAt: now, TombstoneUntil: now.Add(o.TombstoneFor),
	})
	switch {
	case errors.Is(err, rtstore.ErrNotEligible), errors.Is(err, rtstore.ErrLeaseLost):
		rep.Busy++
		return nil
	case errors.Is(err, rtstore.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("gc: %w", err)
	}
	rep.add(del)
	o.Logger.DebugContext(ctx, "gc: deleted session", "session_id", c.SessionID, "runs", del.Runs)
	if o.AfterSessionFunc != nil {
		o.AfterSessionFunc()
	}
	return nil
}

// add counts one deleted (or, dry, measured) session.
func (rep *GCReport) add(d *rtstore.SessionDeleted) {
	rep.Sessions++
	rep.Runs += d.Runs
	rep.Events += d.Events
	rep.Records += d.Records
	rep.Bytes += d.Bytes
}

// ErrGone: the session or run was deleted by retention (issue 23); only
// its owner is told (anyone else gets ErrNotFound). Its id, and the
// request ids of its runs, are never answered with the old result.
var ErrGone = errors.New("gone")

// gone turns a not-found lookup of a session or run into ErrGone when a
// tombstone of the calling principal stands for it; else err is kept.
func (r *Runtime) gone(ctx context.Context, kind rtstore.TombstoneKind, id string, err error) error {
	if !errors.Is(err, rtstore.ErrNotFound) {
		return err
	}
	rs := r.cfg.Retention
	if rs == nil {
		return err
	}
	ts, terr := rs.TombstoneGet(ctx, kind, id)
	if terr != nil {
		if !errors.Is(terr, rtstore.ErrNotFound) {
			return fmt.Errorf("%s: %w", kind, terr)
		}
		return err
	}
	if ts.Principal != PrincipalFrom(ctx) {
		return err
	}
	return fmt.Errorf("%s: %w", kind, ErrGone)
}
