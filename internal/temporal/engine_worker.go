package temporal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"hxd/internal/runtime"
)

// errNoWorker is the client-safe form of runtime.ErrNoWorker.
var errNoWorker = &runtime.PublicError{
	Err:    runtime.ErrNoWorker,
	Detail: "No worker is polling the task queue: start an hxd worker; runs continue once one polls",
}

const (
	// pollerSilence: a live worker's pollers poll the task queue again at
	// least this often (a Temporal long poll lasts one minute), so a task
	// queue whose pollers all last polled longer ago has no worker.
	pollerSilence = 75 * time.Second
	// pollerClockSkew is how far the Temporal server's clock (a poller's
	// last access time) may be from this host's without a stale poller
	// passing for a live one.
	pollerClockSkew = 10 * time.Second
	// describeTimeout bounds the DescribeTaskQueue that confirms a call's
	// failure (the call's own deadline may have passed).
	describeTimeout = 5 * time.Second
)

// workerClient is the engine's Temporal client: it tells "no worker polls
// the task queue" (runtime.ErrNoWorker, 503 with a detail saying so) from
// other failures of queries and updates, which need a worker.
//
//   - A query that no worker took comes back as a FailedPrecondition
//     (matching's answer once no poller was seen for 20 s, after waiting
//     most of the call): no worker.
//   - A query or update that ran out of time while a workflow task was
//     pending (the query is then buffered, and matching never says
//     FailedPrecondition) is no worker when DescribeTaskQueue shows no
//     poller that polled within pollerSilence; otherwise it stays the
//     caller's ErrUnavailable.
//   - Once no worker was found, every query and update first lists the
//     pollers and answers ErrNoWorker at once while none polled since,
//     rather than waiting out its deadline again. A poller that polled
//     since, or a call that succeeds, ends this.
//
// Before a call failed, DescribeTaskQueue is never called: its list lags
// (it keeps a dead poller for minutes) and, on a partitioned task queue,
// may miss a live worker's pollers.
type workerClient struct {
	client.Client
	taskQueue string

	mu         sync.Mutex
	noWorkerAt time.Time // when no worker was found; zero: a worker is assumed
}

// QueryWorkflow runs the query unless the task queue is known to have no
// worker.
func (c *workerClient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	if err := c.stillNoWorker(ctx); err != nil {
		return nil, err
	}
	v, err := c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
	var precondition *serviceerror.FailedPrecondition
	if errors.As(err, &precondition) {
		return nil, c.lost(err)
	}
	return v, c.classify(ctx, err)
}

// UpdateWorkflow sends the update unless the task queue is known to have
// no worker.
func (c *workerClient) UpdateWorkflow(ctx context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if err := c.stillNoWorker(ctx); err != nil {
		return nil, err
	}
	h, err := c.Client.UpdateWorkflow(ctx, o)
	return h, c.classify(ctx, err)
}

// classify returns err, as ErrNoWorker when it is a timeout and no poller
// polled within pollerSilence; nil records that a worker answered.
func (c *workerClient) classify(ctx context.Context, err error) error {
	var deadline *serviceerror.DeadlineExceeded
	switch {
	case err == nil:
		c.mu.Lock()
		c.noWorkerAt = time.Time{}
		c.mu.Unlock()
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &deadline) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), describeTimeout)
		defer cancel()
		if c.silentSince(dctx, time.Now().Add(-pollerSilence)) {
			return c.lost(err)
		}
	}
	return err
}

// lost records that no worker polls and returns err as ErrNoWorker.
func (c *workerClient) lost(err error) error {
	c.mu.Lock()
	c.noWorkerAt = time.Now()
	c.mu.Unlock()
	return fmt.Errorf("task queue %s: %w: %w", c.taskQueue, errNoWorker, err)
}

// stillNoWorker answers ErrNoWorker when no worker was found and no poller
// polled since; nil otherwise.
func (c *workerClient) stillNoWorker(ctx context.Context) error {
	c.mu.Lock()
	since := c.noWorkerAt
	c.mu.Unlock()
	if since.IsZero() || !c.silentSince(ctx, since.Add(-pollerClockSkew)) {
		return nil
	}
	return fmt.Errorf("task queue %s: %w", c.taskQueue, errNoWorker)
}

// silentSince reports whether no poller of the task queue's workflow tasks
// polled after t. It is false when the pollers cannot be listed (the call
// itself then says what is wrong); a poller that polled after t ends the
// no-worker state.
func (c *workerClient) silentSince(ctx context.Context, t time.Time) bool {
	resp, err := c.DescribeTaskQueue(ctx, c.taskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
	if err != nil {
		return false
	}
	for _, p := range resp.GetPollers() {
		if p.GetLastAccessTime().AsTime().After(t) {
			c.mu.Lock()
			c.noWorkerAt = time.Time{}
			c.mu.Unlock()
			return false
		}
	}
	return true
}
