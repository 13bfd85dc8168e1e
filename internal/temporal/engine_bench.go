package temporal

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/google/uuid"

	"hxd/internal/runtime"
)

// The bare workflow is the calibration baseline of `make bench`
// (cmd/hxd/temporal_bench_test.go): a workflow doing n sequential no-op
// activities, i.e. the cost Temporal itself puts on a run with as many
// activities as an hxd run, without hxd's state machine, Redis events or
// HTTP. It is registered only by NewBareWorker, never by hxd worker.
const (
	// BareWorkflowType is the bare workflow's registered name.
	BareWorkflowType = "HxdBareBenchV1"
	// BareActivity is its no-op activity.
	BareActivity = "hxd_bare_noop_v1"
)

func bareWorkflow(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	sum := 0
	for i := range n {
		var out int
		if err := workflow.ExecuteActivity(ctx, BareActivity, i).Get(ctx, &out); err != nil {
			return 0, err
		}
		sum += out
	}
	return sum, nil
}

func bareNoop(_ context.Context, i int) (int, error) { return i, nil }

// NewBareWorker returns a worker on taskQueue running only the bare
// workflow and its activity. The caller starts and stops it.
func NewBareWorker(c Client, taskQueue string) worker.Worker {
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(bareWorkflow, workflow.RegisterOptions{Name: BareWorkflowType})
	w.RegisterActivityWithOptions(bareNoop, activity.RegisterOptions{Name: BareActivity})
	return w
}

// RunBare starts one bare workflow of n activities and waits for it.
func RunBare(ctx context.Context, c Client, taskQueue string, n int) error {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "hxd-bare-" + uuid.Must(uuid.NewV7()).String(), TaskQueue: taskQueue,
	}, BareWorkflowType, n)
	if err != nil {
		return err
	}
	var sum int
	return run.Get(ctx, &sum)
}

// CountActivities returns how many activities the workflow of a
// principal's session scheduled so far (its current run's history).
func CountActivities(ctx context.Context, c Client, principal, sessionID string) (int, error) {
	it := c.GetWorkflowHistory(ctx, WorkflowID(runtime.SessionKey(principal, sessionID)), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, fmt.Errorf("history of %s: %w", sessionID, err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			n++
		}
	}
	return n, nil
}
