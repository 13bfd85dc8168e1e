package temporal

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/agent"
	"hxd/internal/mcp"
	"hxd/internal/model"
	"hxd/internal/tool"
)

// WorkerDeps are the process-local dependencies of a worker. Agent
// factories and credentials never travel through Temporal; only the
// AgentRef does.
type WorkerDeps struct {
	// Agents is the process-local registry activities bind agents from. Required.
	Agents *agent.Registry
	// ModelOptions are passed to model.New.
	ModelOptions model.Options
	// ToolOptions are passed to tool.New.
	ToolOptions tool.Options
	// Events receives the provisional public events. Optional, default: NopSink.
	Events EventSink
	// Logger, default: slog.Default().
	Logger *slog.Logger
	// PublishTimeout bounds one publish from inside a model or tool
	// activity. Optional, default: 5s.
	PublishTimeout time.Duration
	// HeartbeatEvery is how often a running call heartbeats. Optional, default: 5s.
	HeartbeatEvery time.Duration
	// WorkerOptions are passed to worker.New.
	WorkerOptions worker.Options
	// Artifacts stores the files tools return and the tool results longer
	// than the agent's max_result_chars, each with an owner index entry
	// for the session's owner (GET /artifacts/{sha256}), as the local
	// engine does. Optional: without it, tool artifacts are logged and
	// dropped and no result is spilled (the full result stays in the
	// workflow state).
	Artifacts ArtifactStore
	// NewID returns the ids of spilled results ("r_" + id). Default: UUIDv7.
	NewID func() string
	// MCP holds the connections the tool activities call bridged MCP
	// tools over (issue 21): one per agent and server, shared by the
	// worker's activities. Optional, default: a Manager of the worker's
	// own (Logger, hxd's environment for headers_env and env_from). The
	// worker closes it when it stops (NewWorker's Stop or Run; a caller of
	// Register calls Activities.Close), waiting for stdio children.
	MCP *mcp.Manager
	// TracerProvider makes the model and tool activities' chat and
	// execute_tool spans (issue 24), as the local driver makes them
	// (runtime.Tracing). Optional: nil traces nothing.
	TracerProvider trace.TracerProvider
	// CaptureContent puts prompts, completions and tool payloads into
	// those spans, auto-redacted and bounded (runtime.NewTracing).
	CaptureContent bool
}

// ArtifactStore keeps content-addressed artifacts with an owner index
// (artifacts.Store): PutOwned stores data, records that owner may read it
// and returns the lowercase hex SHA-256 of data; GetOwned returns the bytes
// of a digest owner may read, hash verified, and an error wrapping
// artifacts.ErrNotFound (or artifacts.ErrInvalidKey for a malformed
// digest) otherwise.
type ArtifactStore interface {
	PutOwned(ctx context.Context, owner string, data []byte) (string, error)
	GetOwned(ctx context.Context, owner, digest string) ([]byte, error)
}

func (d WorkerDeps) withDefaults() WorkerDeps {
	if d.Events == nil {
		d.Events = NopSink{}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.PublishTimeout <= 0 {
		d.PublishTimeout = 5 * time.Second
	}
	if d.HeartbeatEvery <= 0 {
		d.HeartbeatEvery = 5 * time.Second
	}
	if d.NewID == nil {
		d.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	return d
}

// Registry is where Register puts the workflow and activities: a
// worker.Worker, a workflow replayer or the SDK test environment.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// NewWorker returns a worker on taskQueue ("" → DefaultTaskQueue) with the
// session workflow and the model, tool, publish and spill activities
// registered.
// The caller starts and stops it.
func NewWorker(c client.Client, taskQueue string, deps WorkerDeps) worker.Worker {
	if taskQueue == "" {
		taskQueue = DefaultTaskQueue
	}
	opts := deps.WorkerOptions
	if opts.MaxHeartbeatThrottleInterval == 0 {
		// A cancel reaches a running call with the answer to a heartbeat:
		// the SDK's default throttle (80% of the 20 s heartbeat timeout)
		// would hold it back far longer than a heartbeat period.
		opts.MaxHeartbeatThrottleInterval = deps.withDefaults().HeartbeatEvery
	}
	w := worker.New(c, taskQueue, opts)
	a := Register(w, deps)
	return &closingWorker{Worker: w, a: a}
}

// closingWorker is a worker that closes its activities' MCP connections
// once it stopped (its activities finished or were abandoned).
type closingWorker struct {
	worker.Worker
	a *Activities
}

// Stop stops the worker, then closes the MCP connections.
func (w *closingWorker) Stop() {
	w.Worker.Stop()
	_ = w.a.Close() // Manager.Close always returns nil
}

// Run runs the worker until interruptCh delivers, then closes the MCP
// connections.
func (w *closingWorker) Run(interruptCh <-chan any) error {
	err := w.Worker.Run(interruptCh)
	_ = w.a.Close() // Manager.Close always returns nil
	return err
}

// Register registers the workflow and the activities over deps on r.
func Register(r Registry, deps WorkerDeps) *Activities {
	RegisterWorkflow(r)
	a := NewActivities(deps)
	r.RegisterActivityWithOptions(a.Model, activity.RegisterOptions{Name: ActivityModel})
	r.RegisterActivityWithOptions(a.Tool, activity.RegisterOptions{Name: ActivityTool})
	r.RegisterActivityWithOptions(a.Publish, activity.RegisterOptions{Name: ActivityPublish})
	r.RegisterActivityWithOptions(a.Spill, activity.RegisterOptions{Name: ActivitySpill})
	return a
}

// RegisterWorkflow registers only the session workflow (replayers).
func RegisterWorkflow(r interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}) {
	r.RegisterWorkflowWithOptions(SessionWorkflow, workflow.RegisterOptions{Name: WorkflowType})
}
