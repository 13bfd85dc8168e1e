package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"hxd/internal/runtime"
	"hxd/internal/temporal/artifacts"
	"hxd/internal/temporal/events"
)

// Retention on the Temporal engine (issue 23): the sweeper (Retention.Sweep)
// retires each session whose latest run finished longer ago than its
// policy with the retire update (retire.go), which refuses new runs and
// ends the workflow atomically, then writes the session's and its runs'
// tombstones to S3, deletes their Redis event streams and run-index
// entries, releases the session's artifacts, and deletes the workflow's
// executions. A session retired but not cleaned up (a crash, an outage)
// stays a completed workflow, which the next sweep finds and finishes.

// Tombstone kinds.
const (
	TombstoneSession = "session"
	TombstoneRun     = "run"
)

// Tombstone records a deleted session or run until ExpiresAt.
type Tombstone struct {
	Kind string `json:"kind"`
	// ID is the session's key (runtime.SessionKey) or the run's id.
	ID string `json:"id"`
	// SessionID is the session id its owner knows.
	SessionID string `json:"session_id"`
	// Principal owned the session: only it is told the id is gone.
	Principal string    `json:"principal"`
	RequestID string    `json:"request_id,omitempty"`
	DeletedAt time.Time `json:"deleted_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TombstoneReader reads tombstones: Get returns runtime.ErrNotFound when
// there is none (never deleted, expired or purged).
type TombstoneReader interface {
	Get(ctx context.Context, kind, id string) (*Tombstone, error)
}

// maxTombstone bounds a tombstone object's size.
const maxTombstone = 64 << 10

// S3Tombstones keeps tombstones as small JSON objects
// "<prefix>tombstones/<kind>/<sha256(id)>" (durable, beside the run
// index). Safe for concurrent use.
type S3Tombstones struct {
	client *minio.Client
	bucket string
	prefix string
	now    func() time.Time
}

// NewS3Tombstones returns the tombstones in bucket under prefix (default
// "harness-x/"), on a client from artifacts.NewClient.
func NewS3Tombstones(client *minio.Client, bucket, prefix string) (*S3Tombstones, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("tombstones: s3 client and bucket are required")
	}
	if prefix == "" {
		prefix = artifacts.DefaultPrefix
	}
	return &S3Tombstones{client: client, bucket: bucket, prefix: prefix, now: time.Now}, nil
}

func (x *S3Tombstones) dir() string { return x.prefix + "tombstones/" }

func (x *S3Tombstones) key(kind, id string) string { return x.dir() + kind + "/" + sha256Hex(id) }

// Put writes (or overwrites) a tombstone.
func (x *S3Tombstones) Put(ctx context.Context, ts *Tombstone) error {
	raw, err := json.Marshal(ts)
	if err != nil {
		return fmt.Errorf("tombstones: encode: %w", err)
	}
	key := x.key(ts.Kind, ts.ID)
	_, err = x.client.PutObject(ctx, x.bucket, key, bytes.NewReader(raw), int64(len(raw)),
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("tombstones: put %s: %w", key, err)
	}
	return nil
}

// Get returns the tombstone of kind and id; runtime.ErrNotFound when
// there is none or it expired.
func (x *S3Tombstones) Get(ctx context.Context, kind, id string) (*Tombstone, error) {
	key := x.key(kind, id)
	raw, err := getSmall(ctx, x.client, x.bucket, key, maxTombstone)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return nil, fmt.Errorf("tombstone: %w", runtime.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("tombstones: %w", err)
	}
	var ts Tombstone
	if err := json.Unmarshal(raw, &ts); err != nil {
		return nil, fmt.Errorf("tombstones: decode %s: %w", key, err)
	}
	if ts.Kind != kind || ts.ID != id || !x.now().Before(ts.ExpiresAt) {
		return nil, fmt.Errorf("tombstone: %w", runtime.ErrNotFound)
	}
	return &ts, nil
}

// Purge deletes up to limit tombstones written before before (the sweep
// passes now minus --tombstone-for) and returns how many.
func (x *S3Tombstones) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing
	n := 0
	for obj := range x.client.ListObjects(ctx, x.bucket, minio.ListObjectsOptions{Prefix: x.dir(), Recursive: true}) {
		if obj.Err != nil {
			return n, fmt.Errorf("tombstones: list: %w", obj.Err)
		}
		if !obj.LastModified.Before(before) {
			continue
		}
		if err := x.client.RemoveObject(ctx, x.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			return n, fmt.Errorf("tombstones: delete %s: %w", obj.Key, err)
		}
		if n++; n == limit {
			break
		}
	}
	return n, nil
}

// Count returns the number of tombstones kept.
func (x *S3Tombstones) Count(ctx context.Context) (int64, error) {
	var n int64
	for obj := range x.client.ListObjects(ctx, x.bucket, minio.ListObjectsOptions{Prefix: x.dir(), Recursive: true}) {
		if obj.Err != nil {
			return n, fmt.Errorf("tombstones: list: %w", obj.Err)
		}
		n++
	}
	return n, nil
}

// gone turns a not-found lookup of a session (id: its key) or run into
// runtime.ErrGone when a tombstone of the calling principal stands for
// it; else err is kept.
func (e *Engine) gone(ctx context.Context, kind, id string, err error) error {
	if !errors.Is(err, runtime.ErrNotFound) || e.cfg.Tombstones == nil {
		return err
	}
	ts, terr := e.cfg.Tombstones.Get(ctx, kind, id)
	if terr != nil {
		if !errors.Is(terr, runtime.ErrNotFound) {
			return fmt.Errorf("%s: %w", kind, terr)
		}
		return err
	}
	if ts.Principal != runtime.PrincipalFrom(ctx) {
		return err
	}
	return fmt.Errorf("%s: %w", kind, runtime.ErrGone)
}

// RunIndexDeleter is a RunIndex that can forget a run (S3RunIndex).
type RunIndexDeleter interface {
	Delete(ctx context.Context, runID string) error
}

// StreamDeleter deletes a run's event stream (events.Redis).
type StreamDeleter interface {
	Delete(ctx context.Context, runID string) (events.Deleted, error)
}

// SessionReleaser drops a session's artifact references (artifacts.Store).
type SessionReleaser interface {
	ReleaseSession(ctx context.Context, owner, sessionKey string) (artifacts.Released, error)
}

// Retention sweeps the Temporal engine's finished sessions.
type Retention struct {
	// Client is a connected client of the engine's namespace. Required.
	Client client.Client
	// Namespace of the session workflows. Default: "default".
	Namespace string
	// Tombstones are written before anything is deleted. Required.
	Tombstones *S3Tombstones
	// Index is the engine's run index. Required.
	Index RunIndexDeleter
	// Events, optional: nil leaves event streams to Redis' own expiry.
	Events StreamDeleter
	// Artifacts, optional: nil keeps every artifact.
	Artifacts SessionReleaser
	// CallTimeout bounds one Temporal or storage call. Default: 30s.
	CallTimeout time.Duration
	// NewID names retire updates. Default: a time-based id.
	NewID func() string
}

// Sweep deletes the sessions whose latest run completed or was cancelled
// longer ago than their policy (o.Policy: o.OlderThan, else the agent's
// retention.finished_for, else o.RetainFinishedFor), finishes the
// clean-up of sessions retired before, then purges tombstones older than
// o.TombstoneFor. o.Store and o.DryRun are not used (a dry run is
// refused). A session whose latest run is running, paused, awaiting
// input or failed, or that has no run, is never retired: the workflow
// checks under its own update lock. It stops at the first error and
// returns what it did so far; the next sweep continues.
func (r *Retention) Sweep(ctx context.Context, o runtime.GCOptions) (*runtime.GCReport, error) {
	if o.DryRun {
		return nil, errors.New("gc: the Temporal engine has no dry run")
	}
	if r.Client == nil || r.Tombstones == nil || r.Index == nil {
		return nil, errors.New("gc: Client, Tombstones and Index are required")
	}
	o = o.WithDefaults()
	if r.CallTimeout <= 0 {
		r.CallTimeout = 30 * time.Second
	}
	if r.Namespace == "" {
		r.Namespace = client.DefaultNamespace
	}
	if r.NewID == nil {
		r.NewID = func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	}
	rep := &runtime.GCReport{}
	now := o.Now().UTC()
	// Retired before and not cleaned up: finish them first.
	if err := r.eachSession(ctx, o, "Completed", func(key string) error {
		var res RetireResult
		err := r.query(ctx, key, QueryGetRetired, &res)
		switch {
		case errors.Is(err, runtime.ErrNotFound):
			return nil // deleted; visibility lags
		case ctx.Err() != nil:
			return ctx.Err()
		}
		if err != nil || !res.Retired {
			o.Logger.WarnContext(ctx, "gc: a completed session workflow that was not retired is left alone", "workflow_id", WorkflowID(key), "error", err)
			rep.Busy++
			return nil
		}
		return r.cleanUp(ctx, o, key, &res, now, rep)
	}); err != nil {
		return rep, err
	}
	if _, ok := o.ShortestPolicy(); ok {
		if err := r.eachSession(ctx, o, "Running", func(key string) error {
			return r.sweepSession(ctx, o, key, now, rep)
		}); err != nil {
			return rep, err
		}
	}
	for {
		n, err := r.Tombstones.Purge(ctx, now.Add(-o.TombstoneFor), o.BatchSize)
		rep.TombstonesPurged += n
		if err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
		if n < o.BatchSize {
			break
		}
	}
	n, err := r.Tombstones.Count(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.Tombstones = n
	return rep, nil
}

// eachSession pages the session workflows in that execution status
// (visibility) and calls fn with each session's key.
func (r *Retention) eachSession(ctx context.Context, o runtime.GCOptions, status string, fn func(key string) error) error {
	var token []byte
	for {
		cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
		resp, err := r.Client.ListWorkflow(cctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: r.Namespace, PageSize: int32(o.BatchSize), NextPageToken: token,
			Query: fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = '%s'", WorkflowType, status),
		})
		cancel()
		if err != nil {
			return fmt.Errorf("gc: list %s sessions: %w", strings.ToLower(status), err)
		}
		for _, ex := range resp.GetExecutions() {
			key, ok := cutPrefix(ex.GetExecution().GetWorkflowId(), WorkflowIDPrefix)
			if !ok {
				continue
			}
			if err := fn(key); err != nil {
				return err
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// sweepSession retires and cleans up one running session if its policy
// lets it go.
func (r *Retention) sweepSession(ctx context.Context, o runtime.GCOptions, key string, now time.Time, rep *runtime.GCReport) error {
	var info SessionInfo
	if err := r.query(ctx, key, QueryGetSession, &info); err != nil {
		if errors.Is(err, runtime.ErrNotFound) {
			return nil // gone meanwhile, or retired: the next sweep finishes it
		}
		return fmt.Errorf("gc: session %s: %w", WorkflowID(key), err)
	}
	if info.LatestRun == nil || !info.LatestRun.Status.Finished() || info.Busy || info.LatestUpdatedAt.IsZero() {
		return nil
	}
	keep, ok := o.Policy(info.Agent.Name, info.Agent.Version)
	cutoff := now.Add(-keep)
	if !ok || !info.LatestUpdatedAt.Before(cutoff) {
		return nil
	}
	var res RetireResult
	err := r.update(ctx, key, "retire:"+r.NewID(), RetireRequest{FinishedBefore: cutoff}, &res)
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &app) && app.Type() == ErrTypeNotEligible:
		rep.Busy++ // a run started meanwhile
		return nil
	case errors.Is(err, runtime.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("gc: retire session %s: %w", WorkflowID(key), err)
	}
	return r.cleanUp(ctx, o, key, &res, now, rep)
}

// cleanUp deletes what a retired session left, tombstones first, the
// workflow's executions last (so a crash in between is found again).
func (r *Retention) cleanUp(ctx context.Context, o runtime.GCOptions, key string, res *RetireResult, now time.Time, rep *runtime.GCReport) error {
	wfID := WorkflowID(key)
	fail := func(err error) error { return fmt.Errorf("gc: clean up session %s: %w", wfID, err) }
	// The workflow completes once its handlers and publishes are done: no
	// activity writes events or artifacts after that.
	wctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	err := r.Client.GetWorkflow(wctx, wfID, "").Get(wctx, nil)
	cancel()
	if err != nil {
		return fail(err)
	}
	// The session's tombstone is written after its runs': once it stands,
	// this is a repeated clean-up (Temporal deletes executions
	// asynchronously, and visibility lists them until then), which
	// deletes whatever is left but counts nothing again.
	_, err = r.Tombstones.Get(ctx, TombstoneSession, key)
	repeated := err == nil
	switch {
	case repeated:
	case !errors.Is(err, runtime.ErrNotFound):
		return fail(err)
	default:
		until := now.Add(o.TombstoneFor)
		for _, run := range res.Runs {
			ts := &Tombstone{Kind: TombstoneRun, ID: run.RunID, SessionID: res.SessionID, Principal: res.Owner,
				RequestID: run.RequestID, DeletedAt: now, ExpiresAt: until}
			if err := r.Tombstones.Put(ctx, ts); err != nil {
				return fail(err)
			}
		}
		if err := r.Tombstones.Put(ctx, &Tombstone{Kind: TombstoneSession, ID: key, SessionID: res.SessionID,
			Principal: res.Owner, DeletedAt: now, ExpiresAt: until}); err != nil {
			return fail(err)
		}
	}
	var del runtime.GCReport
	for _, run := range res.Runs {
		if r.Events != nil {
			d, err := r.Events.Delete(ctx, run.RunID)
			if err != nil {
				return fail(err)
			}
			del.Events += d.Events
			del.Bytes += d.Bytes
		}
		if err := r.Index.Delete(ctx, run.RunID); err != nil {
			return fail(err)
		}
	}
	if r.Artifacts != nil {
		rel, err := r.Artifacts.ReleaseSession(ctx, res.Owner, key)
		if err != nil {
			return fail(err)
		}
		del.Artifacts, del.ArtifactBytes = rel.Artifacts, rel.Bytes
	}
	records, size, err := r.deleteExecutions(ctx, wfID)
	if err != nil {
		return fail(err)
	}
	if repeated {
		return nil
	}
	rep.Sessions++
	rep.Runs += len(res.Runs)
	rep.Records += records
	rep.Events += del.Events
	rep.Bytes += del.Bytes + size
	rep.Artifacts += del.Artifacts
	rep.ArtifactBytes += del.ArtifactBytes
	o.Logger.DebugContext(ctx, "gc: deleted session", "workflow_id", wfID, "runs", len(res.Runs))
	if o.AfterSessionFunc != nil {
		o.AfterSessionFunc()
	}
	return nil
}

// deleteExecutions deletes every execution of the workflow id (the
// retired one and those it continued as new from) and returns their
// history events and bytes.
func (r *Retention) deleteExecutions(ctx context.Context, wfID string) (int, int64, error) {
	cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	defer cancel()
	var (
		records int
		size    int64
		token   []byte
		runs    []string
	)
	for {
		resp, err := r.Client.ListWorkflow(cctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: r.Namespace, PageSize: 100, NextPageToken: token,
			Query: fmt.Sprintf("WorkflowId = '%s'", strings.ReplaceAll(wfID, "'", "\\'")),
		})
		if err != nil {
			return 0, 0, fmt.Errorf("list executions: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			records += int(ex.GetHistoryLength())
			size += ex.GetHistorySizeBytes()
			runs = append(runs, ex.GetExecution().GetRunId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	// Visibility may lag: the latest execution is deleted by id as well.
	runs = append(runs, "")
	for _, runID := range runs {
		_, err := r.Client.WorkflowService().DeleteWorkflowExecution(cctx, &workflowservice.DeleteWorkflowExecutionRequest{
			Namespace:         r.Namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: wfID, RunId: runID},
		})
		var notFound *serviceerror.NotFound
		if err != nil && !errors.As(err, &notFound) {
			return 0, 0, fmt.Errorf("delete workflow execution: %w", err)
		}
	}
	return records, size, nil
}

func (r *Retention) query(ctx context.Context, key, queryType string, out any) error {
	cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	defer cancel()
	v, err := r.Client.QueryWorkflow(cctx, WorkflowID(key), "", queryType)
	if err != nil {
		return callErr("query "+queryType, err)
	}
	return v.Get(out)
}

func (r *Retention) update(ctx context.Context, key, updateID string, arg, out any) error {
	cctx, cancel := context.WithTimeout(ctx, r.CallTimeout)
	defer cancel()
	h, err := r.Client.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
		WorkflowID: WorkflowID(key), UpdateID: updateID, UpdateName: UpdateRetire,
		Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(cctx, out)
	}
	if err != nil {
		return callErr("update "+UpdateRetire, err)
	}
	return nil
}
