package temporal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sync/errgroup"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/runtime"
	"hxd/internal/temporal/artifacts"
	"hxd/internal/temporal/events"
)

// OwnerSearchAttribute is the custom Keyword search attribute every
// session workflow is started with: the hex SHA-256 of its owner's
// principal. ListSessions pages the caller's sessions through the
// visibility API with it (the principal itself never reaches visibility).
const OwnerSearchAttribute = "HxdOwner"

var ownerKey = temporal.NewSearchAttributeKeyKeyword(OwnerSearchAttribute)

var _ ArtifactStore = (*artifacts.Store)(nil)

// EventSource is what the engine reads public events from (events.Redis).
type EventSource interface {
	Read(ctx context.Context, runID string, after events.Cursor, limit int) ([]runtime.RunEvent, events.Cursor, bool, error)
	Watch(ctx context.Context, runID string, after events.Cursor, timeout time.Duration) (bool, error)
}

// RunIndex maps a run ID to its session's key (runtime.SessionKey),
// durably: GetRun and the other run-addressed calls only have the run ID,
// and a session's workflow is addressed by the session's key. The engine
// records the mapping before the submit update that creates the run, so
// an index miss means "no such run". Lookup returns runtime.ErrNotFound
// for an unknown run.
type RunIndex interface {
	Record(ctx context.Context, runID, sessionKey string) error
	Lookup(ctx context.Context, runID string) (string, error)
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	// Client is a connected Temporal client (Connect) whose data converter
	// carries the artifact codec. Required; the caller closes it.
	Client client.Client
	// TaskQueue of the session workflows. Default: DefaultTaskQueue.
	TaskQueue string
	// Agents are the registered agents (CreateSession validates the agent
	// and persists its definition in the workflow). Required.
	Agents *agent.Registry
	// Index maps run IDs to session IDs. Required.
	Index RunIndex
	// Events are the provisional public events. Optional: nil answers
	// every event read with a gap event.
	Events EventSource
	// Artifacts is the store the workers put tool artifacts and spilled
	// results in (the same bucket and prefix). Optional: nil answers every
	// Artifact call with runtime.ErrNotFound.
	Artifacts ArtifactStore
	// Tombstones are the retention sweeper's (Retention): a deleted
	// session or run answers runtime.ErrGone to its owner, and a deleted
	// session's id is not taken again. Optional: nil answers
	// runtime.ErrNotFound.
	Tombstones TombstoneReader
	// RuntimeConfig is persisted in every new session's workflow data.
	RuntimeConfig RuntimeConfig
	// MCP connects to the MCP servers agents declare, to discover and pin
	// their tools when a session is created (the calls run in the
	// workers, over their own managers). Optional: nil refuses agents that
	// declare mcp_servers (runtime.ErrMCPTools). The caller closes it.
	MCP *mcp.Manager
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// CallTimeout bounds one query or update round trip (a query or update
	// waits for a worker). Default: 30s.
	CallTimeout time.Duration
	// PollInterval bounds how long WatchRun waits without a Redis wake-up.
	// Default: 500ms.
	PollInterval time.Duration
	// NewID returns new session, request and run IDs. Default: UUIDv7.
	NewID func() string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Engine serves hxd's HTTP API over Temporal: every session is a workflow
// (WorkflowID of the session's key, runtime.SessionKey of its owner and
// the id the caller knows, so that principals' ids never collide), runs
// are started with the submit update, read with the get_run query and
// steered with the control and resolve updates. It satisfies
// internal/http's Service interface. Every call checks that the calling
// principal (runtime.PrincipalFrom) owns the session and answers
// runtime.ErrNotFound otherwise. The workflow's data keeps the id the
// caller knows, which is what runs, events and webhook bodies show.
type Engine struct {
	cfg EngineConfig
	log *slog.Logger

	mu     sync.Mutex
	owners map[string]string // session key → owner (immutable once created)
	runs   map[string]string // run ID → session key (immutable)
}

// maxCache bounds each in-process cache (entries are immutable; a full
// cache is simply cleared).
const maxCache = 100_000

// NewEngine returns an Engine.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Client == nil || cfg.Agents == nil || cfg.Index == nil {
		return nil, errors.New("temporal engine: Client, Agents and Index are required")
	}
	if cfg.TaskQueue == "" {
		cfg.TaskQueue = DefaultTaskQueue
	}
	cfg.Client = &workerClient{Client: cfg.Client, taskQueue: cfg.TaskQueue}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 500 * time.Millisecond
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Engine{cfg: cfg, log: cfg.Logger, owners: map[string]string{}, runs: map[string]string{}}, nil
}

// EnsureSearchAttributes registers OwnerSearchAttribute in the client's
// namespace when it is missing (idempotent; needs operator permissions,
// else register it once with `temporal operator search-attribute create
// --name HxdOwner --type Keyword`).
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	if namespace == "" {
		namespace = client.DefaultNamespace
	}
	op := c.OperatorService()
	resp, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	if _, ok := resp.GetCustomAttributes()[OwnerSearchAttribute]; ok {
		return nil
	}
	_, err = op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: map[string]enumspb.IndexedValueType{OwnerSearchAttribute: enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attribute %s: %w", OwnerSearchAttribute, err)
	}
	return nil
}

// Ready reports whether the Temporal frontend answers.
func (e *Engine) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := e.cfg.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal: %w: %w", runtime.ErrUnavailable, err)
	}
	return nil
}

// Agents lists the registered agents.
func (e *Engine) Agents() []*agent.Definition { return e.cfg.Agents.List() }

// Agent returns one registered agent; runtime.ErrNotFound when unknown.
func (e *Engine) Agent(name, version string) (*agent.Definition, error) {
	d, err := e.cfg.Agents.Get(agent.Ref{Name: name, Version: version})
	if err != nil {
		return nil, fmt.Errorf("agent %s@%s: %w", name, version, runtime.ErrNotFound)
	}
	return d, nil
}

// errRecordingUnsupported is the client-safe form of
// runtime.ErrRecordingUnsupported.
var errRecordingUnsupported = &runtime.PublicError{
	Err:    runtime.ErrRecordingUnsupported,
	Detail: "The Temporal engine does not support flight recording",
}

// CreateSession discovers the tools of the agent's MCP servers, pins them
// in the workflow input and starts the session's workflow. Errors:
// runtime.ErrRecordingUnsupported (recording: true),
// runtime.ErrUnknownAgent, mcp.ErrUnavailable (a server cannot be
// reached), runtime.ErrMCPTools (its tools cannot be bridged), runtime.ErrSessionExists (the
// caller's principal ever used the id: its workflow ID was used, even by
// a closed workflow).
func (e *Engine) CreateSession(ctx context.Context, p runtime.CreateSessionParams) (*runtime.Session, error) {
	if p.Recording != nil && *p.Recording {
		return nil, errRecordingUnsupported
	}
	def, err := e.cfg.Agents.Get(p.Agent)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", p.Agent, runtime.ErrUnknownAgent)
	}
	id := p.SessionID
	if id == "" {
		id = e.cfg.NewID()
	}
	owner := runtime.PrincipalFrom(ctx)
	key := runtime.SessionKey(owner, id)
	// A deleted session's id is never taken again while its tombstone
	// stands (retention deleted its workflow, whose id is free again).
	if err := e.gone(ctx, TombstoneSession, key, runtime.ErrNotFound); !errors.Is(err, runtime.ErrNotFound) {
		return nil, fmt.Errorf("create session: %w", err)
	}
	in, err := NewSessionInput(id, def, owner, p.Metadata, e.cfg.Now(), e.cfg.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	if in.MCPTools, err = e.discoverMCP(ctx, def); err != nil {
		return nil, err
	}
	opts := StartWorkflowOptions(key, e.cfg.TaskQueue)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(ownerKey.ValueSet(ownerHash(owner)))
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	if _, err := e.cfg.Client.ExecuteWorkflow(cctx, opts, WorkflowType, in); err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, fmt.Errorf("session %s: %w", id, runtime.ErrSessionExists)
		}
		return nil, callErr("start session workflow", err)
	}
	e.remember(e.owners, key, owner)
	return &runtime.Session{
		ID: id, Agent: in.Agent, Recording: false, Metadata: in.Metadata, CreatedAt: in.CreatedAt,
		MCPTools: in.MCPTools,
	}, nil
}

// ownerHash is the OwnerSearchAttribute value of a principal.
func ownerHash(principal string) string { return sha256Hex(principal) }

// sha256Hex is the lowercase hex SHA-256 of s.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// GetSession returns one of the caller's sessions with its latest run.
func (e *Engine) GetSession(ctx context.Context, sessionID string) (*runtime.Session, error) {
	return e.sessionOfKey(ctx, sessionKey(ctx, sessionID))
}

// sessionKey is the key of the caller's session of that id.
func sessionKey(ctx context.Context, sessionID string) string {
	return runtime.SessionKey(runtime.PrincipalFrom(ctx), sessionID)
}

// sessionOfKey returns the session stored under key if the caller owns it.
func (e *Engine) sessionOfKey(ctx context.Context, key string) (*runtime.Session, error) {
	info, err := e.sessionInfo(ctx, key)
	if err != nil {
		return nil, err
	}
	s := info.Session()
	return &s, nil
}

// sessionInfo queries get_session of the session stored under key and
// checks the owner.
func (e *Engine) sessionInfo(ctx context.Context, key string) (*SessionInfo, error) {
	var info SessionInfo
	if err := e.query(ctx, key, QueryGetSession, &info); err != nil {
		return nil, err
	}
	if info.Owner != runtime.PrincipalFrom(ctx) {
		return nil, fmt.Errorf("session: %w", runtime.ErrNotFound)
	}
	e.remember(e.owners, key, info.Owner)
	return &info, nil
}

// ownSession checks that the caller owns the session stored under key,
// from the owner cache when possible (an owner never changes), else with
// get_session.
func (e *Engine) ownSession(ctx context.Context, key string) error {
	e.mu.Lock()
	owner, ok := e.owners[key]
	e.mu.Unlock()
	if !ok {
		_, err := e.sessionInfo(ctx, key)
		return err
	}
	if owner != runtime.PrincipalFrom(ctx) {
		return fmt.Errorf("session: %w", runtime.ErrNotFound)
	}
	return nil
}

// runSession returns the key of the session of a run the caller owns.
func (e *Engine) runSession(ctx context.Context, runID string) (string, error) {
	e.mu.Lock()
	sid, ok := e.runs[runID]
	e.mu.Unlock()
	if !ok {
		var err error
		if sid, err = e.cfg.Index.Lookup(ctx, runID); err != nil {
			return "", fmt.Errorf("run %s: %w", runID, e.gone(ctx, TombstoneRun, runID, err))
		}
		e.remember(e.runs, runID, sid)
	}
	if err := e.ownSession(ctx, sid); err != nil {
		return "", err
	}
	return sid, nil
}

func (e *Engine) remember(m map[string]string, k, v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(m) >= maxCache {
		clear(m)
	}
	m[k] = v
}

// listConcurrency bounds the queries one list page runs at once.
const listConcurrency = 8

// listSessionsPage lists up to limit of the caller's sessions after the
// visibility page token (nil for the first) and returns them with the
// next token (nil on the last page).
func (e *Engine) listSessionsPage(ctx context.Context, limit int, token []byte) ([]runtime.Session, []byte, error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	resp, err := e.cfg.Client.ListWorkflow(cctx, &workflowservice.ListWorkflowExecutionsRequest{
		PageSize:      int32(limit),
		NextPageToken: token,
		Query: fmt.Sprintf("WorkflowType = '%s' AND %s = '%s'",
			WorkflowType, OwnerSearchAttribute, ownerHash(runtime.PrincipalFrom(ctx))),
	})
	if err != nil {
		var invalid *serviceerror.InvalidArgument
		if token != nil && errors.As(err, &invalid) {
			return nil, nil, invalidCursor()
		}
		return nil, nil, callErr("list sessions", err)
	}
	execs := resp.GetExecutions()
	items := make([]*runtime.Session, len(execs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listConcurrency)
	for i, ex := range execs {
		key, ok := cutPrefix(ex.GetExecution().GetWorkflowId(), WorkflowIDPrefix)
		if !ok {
			continue
		}
		g.Go(func() error {
			s, err := e.sessionOfKey(gctx, key)
			if errors.Is(err, runtime.ErrNotFound) || errors.Is(err, runtime.ErrGone) {
				return nil // gone between list and query, or deleted by retention
			}
			items[i] = s
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	out := make([]runtime.Session, 0, len(items))
	for _, s := range items {
		if s != nil {
			out = append(out, *s)
		}
	}
	if t := resp.GetNextPageToken(); len(t) > 0 {
		return out, t, nil
	}
	return out, nil, nil
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

func clampLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 1000:
		return 1000
	}
	return n
}

func invalidCursor() error {
	return &runtime.PublicError{Err: runtime.ErrInvalidCursor, Detail: "cursor is not one this server issued"}
}

// SubmitRun sends the submit update (update ID = request ID) and returns
// the run it started, or the run the request ID already started
// (created=false).
func (e *Engine) SubmitRun(ctx context.Context, p runtime.SubmitParams) (*runtime.RunResult, bool, error) {
	key := sessionKey(ctx, p.SessionID)
	if err := e.ownSession(ctx, key); err != nil {
		return nil, false, err
	}
	requestID := p.RequestID
	if requestID == "" {
		requestID = e.cfg.NewID()
	}
	runID := e.cfg.NewID()
	// Indexed first: a run is never created without its index entry. An
	// entry whose update is refused (or deduplicated) names no run of the
	// session and answers 404 like any unknown run.
	if err := e.cfg.Index.Record(ctx, runID, key); err != nil {
		return nil, false, fmt.Errorf("index run: %w: %w", runtime.ErrUnavailable, err)
	}
	e.remember(e.runs, runID, key)
	var res SubmitResult
	err := e.update(ctx, key, UpdateSubmit, UpdateID(requestID),
		SubmitRequest{Message: p.Message, RequestID: requestID, RunID: runID, Stream: p.Stream, Trace: TraceContextOf(ctx)}, &res)
	if err != nil {
		return nil, false, err
	}
	run := res.Run
	if run.RunID == runID {
		return &run, true, nil
	}
	// Temporal answers a repeated update ID with the first update's
	// outcome without running the handler, so the message was never
	// compared. A second update with a fresh ID runs the handler's
	// request-ID check: the same message answers the same run (and starts
	// nothing), a different one is rejected with request_id_conflict
	// before it reaches the history.
	res = SubmitResult{}
	err = e.update(ctx, key, UpdateSubmit, "check:"+e.cfg.NewID(),
		SubmitRequest{Message: p.Message, RequestID: requestID, RunID: runID, Stream: p.Stream, Trace: TraceContextOf(ctx)}, &res)
	if err != nil {
		return nil, false, err
	}
	run = res.Run
	e.remember(e.runs, run.RunID, key)
	return &run, false, nil
}

// EventLag is how long an event stream of a stopped run waits for its
// run_result event: the workflow publishes a stopped run's settled events
// in an activity after its state changed (internal/http's eventLagger).
func (e *Engine) EventLag() time.Duration { return 5 * time.Second }

// WaitRun returns the run once it is no longer running, or after d.
func (e *Engine) WaitRun(ctx context.Context, runID string, d time.Duration) (*runtime.RunResult, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		ch, release := e.WatchRun(runID)
		res, err := e.GetRun(ctx, runID)
		if err != nil || res.Status != runtime.StatusRunning {
			release()
			return res, err
		}
		select {
		case <-ch:
			release()
		case <-deadline.C:
			release()
			return e.GetRun(ctx, runID)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
}

// GetRun answers the get_run query of the run's session workflow.
func (e *Engine) GetRun(ctx context.Context, runID string) (*runtime.RunResult, error) {
	sid, err := e.runSession(ctx, runID)
	if err != nil {
		return nil, err
	}
	return e.getRun(ctx, sid, runID)
}

func (e *Engine) getRun(ctx context.Context, key, runID string) (*runtime.RunResult, error) {
	var run runtime.RunResult
	if err := e.query(ctx, key, QueryGetRun, &run, runID); err != nil {
		return nil, err
	}
	if run.RunID != runID || run.SessionID != runtime.SessionIDOf(key) {
		return nil, fmt.Errorf("run %s: %w", runID, runtime.ErrNotFound)
	}
	return &run, nil
}

// ListRuns pages a session's runs, oldest first; the cursor is the number
// of runs already listed (runs are only ever appended).
func (e *Engine) ListRuns(ctx context.Context, sessionID string, p runtime.ListParams) (runtime.Page[runtime.RunResult], error) {
	limit := clampLimit(p.Limit)
	var offset int
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return runtime.Page[runtime.RunResult]{}, invalidCursor()
		}
		offset = n
	}
	key := sessionKey(ctx, sessionID)
	info, err := e.sessionInfo(ctx, key)
	if err != nil {
		return runtime.Page[runtime.RunResult]{}, err
	}
	page := runtime.Page[runtime.RunResult]{Items: []runtime.RunResult{}}
	if offset > len(info.Runs) {
		return page, invalidCursor()
	}
	ids := info.Runs[offset:]
	if len(ids) > limit {
		ids = ids[:limit]
		page.NextCursor = strconv.Itoa(offset + limit)
	}
	items := make([]runtime.RunResult, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listConcurrency)
	for i, id := range ids {
		e.remember(e.runs, id, key)
		g.Go(func() error {
			run, err := e.getRun(gctx, key, id)
			if err != nil {
				return err
			}
			items[i] = *run
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return runtime.Page[runtime.RunResult]{}, err
	}
	page.Items = append(page.Items, items...)
	return page, nil
}

// GapReason is the data.reason of the gap event.
const GapReason = "event_history_unavailable"

// ListEvents returns up to limit provisional events with cursor > after
// from Redis. When events after `after` are lost (expired or trimmed
// history) or Redis cannot be read, it returns one "gap" event
// {"reason": "event_history_unavailable"} with cursor 0 ("start over")
// followed by the events from the stream's start. The run's state is
// always available from GetRun.
func (e *Engine) ListEvents(ctx context.Context, runID string, after int64, limit int) ([]runtime.RunEvent, error) {
	key, err := e.runSession(ctx, runID)
	if err != nil {
		return nil, err
	}
	sid := runtime.SessionIDOf(key)
	cur, err := events.CursorFromInt64(after)
	if err != nil {
		return nil, &runtime.PublicError{Err: runtime.ErrInvalidCursor, Detail: "after is not an event cursor"}
	}
	if limit <= 0 || limit > events.MaxReadLimit {
		limit = events.MaxReadLimit
	}
	if e.cfg.Events == nil {
		return []runtime.RunEvent{gapEvent(sid, runID, after)}, nil
	}
	evs, _, gap, err := e.cfg.Events.Read(ctx, runID, cur, limit)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.log.WarnContext(ctx, "read run events", "run_id", runID, "error", err)
		return []runtime.RunEvent{gapEvent(sid, runID, after)}, nil
	}
	if !gap {
		return evs, nil
	}
	out := append([]runtime.RunEvent{gapEvent(sid, runID, after)}, evs...)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// gapEvent is the event that replaces lost history: cursor 0, so that a
// client continuing from it starts over from the stream's beginning.
func gapEvent(sessionID, runID string, after int64) runtime.RunEvent {
	return runtime.RunEvent{
		Type:      runtime.EventGap,
		Data:      json.RawMessage(`{"reason":"` + GapReason + `"}`),
		SessionID: sessionID,
		RunID:     runID,
		EventID:   "gap:" + runID + ":" + strconv.FormatInt(after, 10),
		Cursor:    events.Start.String(),
		CreatedAt: time.Now().UTC(), // made as it is read: no stored time
	}
}

// WatchRun returns a channel closed when the run's event stream gets an
// entry (Redis XREAD) or after PollInterval, whichever comes first; the
// caller then re-reads the authoritative state. cancel must be called.
func (e *Engine) WatchRun(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.PollInterval)
	go func() {
		defer close(ch)
		if e.cfg.Events != nil && events.ValidateRunID(runID) == nil {
			// Entries from now on: Redis stream IDs are Redis-clock
			// milliseconds, so a skewed clock only costs the poll interval.
			now := events.Cursor(e.cfg.Now().UnixMilli() << events.SeqBits)
			if _, err := e.cfg.Events.Watch(ctx, runID, now, e.cfg.PollInterval); err == nil {
				return
			}
		}
		<-ctx.Done()
	}()
	return ch, cancel
}

// control sends the control update to the caller's session of that id.
func (e *Engine) control(ctx context.Context, sessionID, action string) (*ControlResult, error) {
	key := sessionKey(ctx, sessionID)
	if err := e.ownSession(ctx, key); err != nil {
		return nil, err
	}
	req := ControlRequest{Action: action}
	if action == ActionResume {
		req.Trace = TraceContextOf(ctx)
	}
	var res ControlResult
	if err := e.update(ctx, key, UpdateControl, e.cfg.NewID(), req, &res); err != nil {
		return nil, err
	}
	if res.Run != nil {
		e.remember(e.runs, res.Run.RunID, key)
	}
	return &res, nil
}

// Pause asks the latest unfinished run to pause; it returns the session's
// latest run (nil when none).
func (e *Engine) Pause(ctx context.Context, sessionID string) (*runtime.RunResult, error) {
	res, err := e.control(ctx, sessionID, ActionPaused)
	if err != nil {
		return nil, err
	}
	return res.Run, nil
}

// Cancel asks the latest unfinished run to cancel; it returns the
// session's latest run (nil when none).
func (e *Engine) Cancel(ctx context.Context, sessionID string) (*runtime.RunResult, error) {
	res, err := e.control(ctx, sessionID, ActionCancelled)
	if err != nil {
		return nil, err
	}
	return res.Run, nil
}

// Resume resumes the latest unfinished run; "" when nothing to resume.
// The Temporal engine never records, so recording: true is
// runtime.ErrRecordingMismatch.
func (e *Engine) Resume(ctx context.Context, sessionID string, p runtime.ResumeParams) (string, error) {
	if err := e.ownSession(ctx, sessionKey(ctx, sessionID)); err != nil {
		return "", err
	}
	if p.Recording != nil && *p.Recording {
		return "", &runtime.PublicError{Err: runtime.ErrRecordingMismatch, Detail: "The session is not recorded"}
	}
	res, err := e.control(ctx, sessionID, ActionResume)
	if err != nil || res.RunID == nil {
		return "", err
	}
	return *res.RunID, nil
}

// Pending lists the latest run's tools awaiting a decision.
func (e *Engine) Pending(ctx context.Context, sessionID string) ([]runtime.PendingTool, error) {
	key := sessionKey(ctx, sessionID)
	if err := e.ownSession(ctx, key); err != nil {
		return nil, err
	}
	var out []runtime.PendingTool
	if err := e.query(ctx, key, QueryGetPending, &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []runtime.PendingTool{}
	}
	return out, nil
}

// Approve decides an approval with the resolve update.
func (e *Engine) Approve(ctx context.Context, p runtime.ApproveParams) (*runtime.RunResult, error) {
	allow := p.Allow
	return e.resolve(ctx, p.SessionID, ResolveRequest{Key: p.ExecutionKey, Allow: &allow, Resume: p.Resume})
}

// Resolve decides an uncertain outcome with the resolve update.
func (e *Engine) Resolve(ctx context.Context, p runtime.ResolveParams) (*runtime.RunResult, error) {
	return e.resolve(ctx, p.SessionID, ResolveRequest{
		Key: p.ExecutionKey, Result: p.Result, Retry: p.Retry, Abort: p.Abort, Resume: p.Resume,
	})
}

func (e *Engine) resolve(ctx context.Context, sessionID string, req ResolveRequest) (*runtime.RunResult, error) {
	key := sessionKey(ctx, sessionID)
	if err := e.ownSession(ctx, key); err != nil {
		return nil, err
	}
	if req.Resume {
		req.Trace = TraceContextOf(ctx)
	}
	var res ResolveResult
	if err := e.update(ctx, key, UpdateResolve, e.cfg.NewID(), req, &res); err != nil {
		return nil, err
	}
	return &res.Run, nil
}

// Export refuses: the Temporal engine keeps no flight recorder
// (runtime.ErrRecordingUnsupported; runtime.ErrNotFound for a run the
// caller does not own).
func (e *Engine) Export(ctx context.Context, runID string, _ func(*runtime.Incident) error) error {
	if _, err := e.runSession(ctx, runID); err != nil {
		return err
	}
	return errRecordingUnsupported
}

// Artifact returns the bytes of an artifact a tool of one of the caller's
// sessions returned, or of a result of theirs spilled over
// max_result_chars: the tool activity recorded the session's owner in the
// store's owner index before the reference reached the run state, and the
// bytes are read hash verified. Anything else, whatever the key's shape
// (not 64 lowercase hex, unknown, another principal's, a payload the codec
// stored), is runtime.ErrNotFound; a store outage is runtime.ErrUnavailable.
func (e *Engine) Artifact(ctx context.Context, sha256 string) ([]byte, error) {
	if e.cfg.Artifacts == nil || !artifacts.ValidDigest(sha256) {
		return nil, fmt.Errorf("artifact: %w", runtime.ErrNotFound)
	}
	data, err := e.cfg.Artifacts.GetOwned(ctx, runtime.PrincipalFrom(ctx), sha256)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, artifacts.ErrNotFound), errors.Is(err, artifacts.ErrInvalidKey):
		return nil, fmt.Errorf("artifact: %w", runtime.ErrNotFound)
	case errors.Is(err, artifacts.ErrCorrupt), errors.Is(err, artifacts.ErrTooLarge):
		return nil, fmt.Errorf("artifact %s: %w", sha256, err)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("artifact %s: %w: %w", sha256, runtime.ErrUnavailable, err)
}

// query runs a query on the workflow of the session stored under key and
// decodes its result; a deleted session is runtime.ErrGone to its owner.
func (e *Engine) query(ctx context.Context, key, queryType string, out any, args ...any) error {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	v, err := e.cfg.Client.QueryWorkflow(cctx, WorkflowID(key), "", queryType, args...)
	if err != nil {
		return e.gone(ctx, TombstoneSession, key, callErr("query "+queryType, err))
	}
	if err := v.Get(out); err != nil {
		return fmt.Errorf("decode %s result: %w", queryType, err)
	}
	return nil
}

// update runs an update on the workflow of the session stored under key
// and waits for its result; a deleted session is runtime.ErrGone to its
// owner.
func (e *Engine) update(ctx context.Context, key, name, updateID string, arg, out any) error {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer cancel()
	h, err := e.cfg.Client.UpdateWorkflow(cctx, client.UpdateWorkflowOptions{
		WorkflowID:   WorkflowID(key),
		UpdateID:     updateID,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(cctx, out)
	}
	if err != nil {
		return e.gone(ctx, TombstoneSession, key, callErr("update "+name, err))
	}
	return nil
}

// callErr maps a Temporal client error to the runtime's errors: the
// contract's application error types (MapError), a missing workflow →
// ErrNotFound, an unreachable server or a call timeout → ErrUnavailable.
// Any other application error (the retire update's ErrTypeNotEligible)
// stays reachable with errors.As.
func callErr(op string, err error) error {
	var qf *serviceerror.QueryFailed
	if errors.As(err, &qf) && qf.Failure != nil {
		err = temporal.GetDefaultFailureConverter().FailureToError(qf.Failure)
	}
	if mapped, ok := mapAppError(err); ok {
		return mapped
	}
	var notFound *serviceerror.NotFound
	var nsNotFound *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &notFound) && !errors.As(err, &nsNotFound):
		return fmt.Errorf("%s: %w", op, runtime.ErrNotFound)
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded), isUnavailable(err):
		return fmt.Errorf("%s: %w: %w", op, runtime.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func isUnavailable(err error) bool {
	var (
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
		canceled    *serviceerror.Canceled
	)
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &canceled)
}
