package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"hxd/internal/agent"
	"hxd/internal/journal"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/tool"
)

// Store is the storage seam the runtime consumes (declared in rtstore).
type Store = rtstore.Store

// Config wires a Runtime. Only cmd/hxd fills it.
type Config struct {
	// Store holds all durable state. Required.
	Store Store
	// Agents is the registry of agent definitions. Required.
	Agents *agent.Registry
	// Logger, default: slog.Default().
	Logger *slog.Logger
	// ModelOptions are passed to model.New for every agent.
	ModelOptions model.Options
	// ToolOptions are passed to tool.New for every tool.
	ToolOptions tool.Options
	// NowFunc, default: time.Now.
	NowFunc func() time.Time
	// NewIDFunc returns a new unique id, default: UUIDv7.
	NewIDFunc func() string
	// RandFunc returns a float in [0,1) for backoff jitter, default: math/rand.
	RandFunc func() float64
	// SleepFunc waits d or until ctx ends, default: a timer.
	SleepFunc func(ctx context.Context, d time.Duration) error
	// CommitTimeout bounds one boundary commit, default: 10s.
	CommitTimeout time.Duration
	// CommitAttempts is how often a failing commit is tried before the run
	// stops with a recording error, default: 3. A run being driven waits
	// out a commit that keeps failing with ErrUnavailable instead (it
	// tries again, up to every 5 s, until storage takes it).
	CommitAttempts int
	// MaxSessionDuration is the server default deadline of a drive
	// (agents may set their own), default: none.
	MaxSessionDuration time.Duration
	// AfterCommitFunc, when set, is called after every successful boundary
	// commit with the boundary kinds it held (testing hook HXD_CRASH_AFTER),
	// and after every delta-only commit of a streamed model call with
	// [event] (no other commit reports that kind).
	AfterCommitFunc func(kinds []journal.Kind)
	// CheckpointFunc, when set, is called after every successful commit
	// with {session_id, run_id, status, phase} (the id the caller knows);
	// it must not block.
	CheckpointFunc func(sessionID, runID string, status RunStatus, phase Phase)
	// WatchPoll is how often event watchers re-check storage when another
	// process may write, default: 1s. NotifyRun wakes them sooner.
	WatchPoll time.Duration
	// LeaseRenewEvery is how often a driver renews its session lease
	// (REFERENCE §4.6: a third of the lease duration), default: 10s. A
	// renewal that reports the lease lost, or two failed renewals in a
	// row, stop the driver without a further commit. Each renewal may take
	// at most LeaseRenewEvery (a renewal stuck longer counts as failed).
	LeaseRenewEvery time.Duration
	// LeaseLostFunc, when set, is called (from the driver's heartbeat, must
	// not block) when a driver stops because its session lease was lost:
	// the run stays running in storage for another process, or a later
	// resume, to finish. The demo uses it to stop instead of waiting for a
	// run it no longer drives.
	LeaseLostFunc func(sessionID, runID string, err error)
	// ExpiredRunsFunc lists the running runs whose session lease expired
	// (another process died driving them); Reap and StartReaper resume
	// them. Nil: no reaper (SQLite, where a dead process's lock is gone at
	// once and start-up recovery suffices).
	ExpiredRunsFunc func(ctx context.Context) ([]*rtstore.RunRow, error)
	// ExpiredRunsWake, when set, makes the reaper (StartReaper) reap at
	// once, besides its rounds, whenever it receives: the store saw a
	// process die, whose runs are then listed by ExpiredRunsFunc without
	// waiting for their leases to expire.
	ExpiredRunsWake <-chan struct{}
	// MCP connects to the MCP servers of agents (issue 21): discovery at
	// session creation, and the calls of their pinned tools. Nil: a session
	// of an agent declaring mcp_servers is refused (ErrMCPTools).
	MCP *mcp.Manager
	// Retention holds the tombstones of sessions and runs deleted by gc
	// (issue 23): their owner gets ErrGone instead of ErrNotFound. Nil:
	// Store's own when it implements rtstore.RetentionStore, else none.
	Retention rtstore.RetentionStore
	// TracerProvider traces runs with OpenTelemetry (issue 24, tracing.go):
	// invoke_agent, chat, execute_tool, hxd.commit and hxd.export spans.
	// Nil: no tracing, at no cost. The global provider is never used.
	TracerProvider trace.TracerProvider
	// CaptureContent puts prompts, completions and tool payloads into the
	// spans, auto-redacted as exports are and bounded (NewTracing).
	CaptureContent bool
}

// Runtime drives durable runs. Safe for concurrent use.
type Runtime struct {
	cfg    Config
	store  Store
	log    *slog.Logger
	agents *agent.Registry
	// tracing makes the spans of runs; nil without a TracerProvider.
	tracing *Tracing

	mu       sync.Mutex
	bindings map[agent.Ref]*binding
	active   map[string]*driver // by session id
	// driving holds the run ids of active's drivers: NotifyRun leaves
	// their watchers alone (driving[id] is set and cleared with active).
	driving map[string]struct{}
	// submits are the sessions with a submission holding or awaiting its
	// turn (submitTurn), by session id.
	submits  map[string]*submitTurn
	stopping bool
	wg       sync.WaitGroup
	quit     chan struct{} // closed by Stop

	notify notifier
	// settled wakes WaitRun: closed at a commit that leaves a run not
	// running, when its driver ends, and by NotifyRun.
	settled notifier
}

// New returns a Runtime; call Stop to end it.
func New(cfg Config) (*Runtime, error) {
	if cfg.Store == nil || cfg.Agents == nil {
		return nil, errors.New("runtime config needs a store and an agent registry")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if rs, ok := cfg.Store.(rtstore.RetentionStore); ok && cfg.Retention == nil {
		cfg.Retention = rs
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.RandFunc == nil {
		cfg.RandFunc = rand.Float64
	}
	if cfg.SleepFunc == nil {
		cfg.SleepFunc = sleepCtx
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 10 * time.Second
	}
	if cfg.CommitAttempts <= 0 {
		cfg.CommitAttempts = 3
	}
	if cfg.WatchPoll <= 0 {
		cfg.WatchPoll = time.Second
	}
	if cfg.LeaseRenewEvery <= 0 {
		cfg.LeaseRenewEvery = 10 * time.Second
	}
	return &Runtime{
		cfg: cfg, store: cfg.Store, agents: cfg.Agents,
		log:      cfg.Logger.With("component", "runtime"),
		tracing:  NewTracing(cfg.TracerProvider, cfg.CaptureContent),
		bindings: map[agent.Ref]*binding{},
		active:   map[string]*driver{},
		driving:  map[string]struct{}{},
		submits:  map[string]*submitTurn{},
		notify:   notifier{chans: map[string]*watchers{}},
		settled:  notifier{chans: map[string]*watchers{}},
		quit:     make(chan struct{}),
	}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Ready reports whether storage is reachable and the schema current.
func (r *Runtime) Ready(ctx context.Context) error { return r.store.Ping(ctx) }

// Agents lists the registered agents.
func (r *Runtime) Agents() []*agent.Definition { return r.agents.List() }

// Agent returns one registered agent; ErrNotFound when unknown.
func (r *Runtime) Agent(name, version string) (*agent.Definition, error) {
	d, err := r.agents.Get(agent.Ref{Name: name, Version: version})
	if err != nil {
		return nil, fmt.Errorf("agent %s@%s: %w", name, version, ErrNotFound)
	}
	return d, nil
}

// binding is an agent definition bound to its provider and tools.
type binding struct {
	def      *agent.Definition
	config   json.RawMessage // JSON of def, compared with the session's
	provider model.Provider
	tools    map[string]tool.Tool
	specs    []model.ToolSpec
	resultMW map[string][]agent.Middleware

	// fallbacks are the providers of the agent's fallback entries, in
	// chain order (fallback.go).
	fallbacks []model.Provider
}

func (r *Runtime) bindRef(name, version string) (*binding, error) {
	return r.bind(agent.Ref{Name: name, Version: version})
}

func (r *Runtime) bind(ref agent.Ref) (*binding, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.bindings[ref]; ok {
		return b, nil
	}
	def, err := r.agents.Get(ref)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ref, ErrUnknownAgent)
	}
	cfgJSON, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("encode agent %s: %w", ref, err)
	}
	p, err := model.New(def.Model, r.cfg.ModelOptions)
	if err != nil {
		return nil, fmt.Errorf("bind model of agent %s: %w", ref, err)
	}
	fallbacks, err := BindFallbacks(def, r.cfg.ModelOptions)
	if err != nil {
		return nil, fmt.Errorf("bind model of agent %s: %w", ref, err)
	}
	b := &binding{def: def, config: cfgJSON, provider: p, fallbacks: fallbacks, tools: map[string]tool.Tool{}, resultMW: map[string][]agent.Middleware{}}
	for _, td := range def.Tools {
		t, err := tool.New(td.Config, r.cfg.ToolOptions)
		if err != nil {
			return nil, fmt.Errorf("bind tool %s of agent %s: %w", td.Name, ref, err)
		}
		b.tools[td.Name] = t
		b.specs = append(b.specs, t.Spec())
		b.resultMW[td.Name] = td.ResultMiddleware
	}
	r.bindings[ref] = b
	return b, nil
}

// notifier wakes event watchers when a run commits. A run's entry lives
// while someone watches it: the last watcher to leave removes it, so runs
// that are watched once and never commit again leave nothing behind.
type notifier struct {
	mu    sync.Mutex
	chans map[string]*watchers
}

// watchers is the channel of one run's watchers and how many they are.
type watchers struct {
	ch chan struct{}
	n  int
}

// watch returns a channel closed at runID's next wake, and the func that
// ends this watch (call it once, when done with the channel).
func (n *notifier) watch(runID string) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.chans[runID]
	if !ok {
		w = &watchers{ch: make(chan struct{})}
		n.chans[runID] = w
	}
	w.n++
	var once sync.Once
	return w.ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			w.n--
			if w.n == 0 && n.chans[runID] == w {
				delete(n.chans, runID)
			}
		})
	}
}

func (n *notifier) wake(runID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.chans[runID]; ok {
		close(w.ch)
		delete(n.chans, runID)
	}
}

// wakeAll wakes every watcher.
func (n *notifier) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, w := range n.chans {
		close(w.ch)
		delete(n.chans, id)
	}
}

// watched is the number of runs with watchers (tests).
func (n *notifier) watched() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chans)
}

// NotifyRun wakes the watchers of runID as a commit of this process would:
// cmd/hxd feeds it the commit notifications of other processes (PostgreSQL
// LISTEN/NOTIFY). "" wakes every watcher ("anything may have changed").
// Watchers keep polling every WatchPoll in any case.
//
// A run driven by this process is left alone: only its driver commits
// it (the lease fences every other process), and each of its commits
// woke the watchers already, before its notification came back through
// the database; waking them again would only cost each one a read (a
// ?wait= request two per boundary). A driver whose lease another process
// took stops on its next renewal and wakes them as it ends; WatchPoll
// bounds the wait until then.
func (r *Runtime) NotifyRun(runID string) {
	if runID == "" {
		r.notify.wakeAll()
		r.settled.wakeAll()
		return
	}
	r.mu.Lock()
	_, here := r.driving[runID]
	r.mu.Unlock()
	if here {
		return
	}
	r.notify.wake(runID)
	r.settled.wake(runID)
}

// WatchRun returns a channel closed at the next commit of the run in this
// process, or after the poll interval (another process may be writing),
// and a func that must be called to release it.
func (r *Runtime) WatchRun(runID string) (<-chan struct{}, func()) {
	src, unwatch := r.notify.watch(runID)
	out := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer unwatch()
		t := time.NewTimer(r.cfg.WatchPoll)
		defer t.Stop()
		select {
		case <-src:
		case <-t.C:
		case <-done:
			return
		}
		close(out)
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }
}
