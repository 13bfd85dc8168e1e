package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"hxd/internal/agent"
	"hxd/internal/model"
	"hxd/internal/runtime"
)

// TestServerRetireRacesSubmit: on a real Temporal server, a retire and a
// submit sent at once to a finished session never both succeed: either
// the session is retired (the workflow completes and the submit is
// refused or finds no workflow) or the run is started (and the retire is
// refused as not eligible). So no run starts on a session being deleted.
func TestServerRetireRacesSubmit(t *testing.T) {
	def := scriptedAgent("plain", nil, model.ScriptStep{Text: "done"}, model.ScriptStep{Text: "again"})
	reg := agent.NewRegistry()
	require.NoError(t, reg.Register(def))
	registered, _ := reg.Get(def.Ref())
	sw := startServerWorker(t, WorkerDeps{Agents: reg})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	far := time.Now().Add(time.Hour)
	retired, started := 0, 0
	for i := range 6 {
		run := sw.start(ctx, t, registered, "race-"+strconv.Itoa(i))
		waitStatus(ctx, t, sw.c, run.GetID(), "run-1", runtime.StatusCompleted)
		var (
			wg                   sync.WaitGroup
			retireErr, submitErr error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			retireErr = updateErr(ctx, sw.c, run.GetID(), UpdateRetire, "retire", RetireRequest{FinishedBefore: far})
		}()
		go func() {
			defer wg.Done()
			submitErr = updateErr(ctx, sw.c, run.GetID(), UpdateSubmit, "req-2",
				SubmitRequest{Message: json.RawMessage(`"next"`), RequestID: "req-2", RunID: "run-2"})
		}()
		wg.Wait()
		var app *temporal.ApplicationError
		switch {
		case retireErr == nil:
			require.Error(t, submitErr, "a submit after the retire starts no run")
			require.NoError(t, sw.c.GetWorkflow(ctx, run.GetID(), "").Get(ctx, nil), "the retired workflow completes")
			retired++
		case errors.As(retireErr, &app) && app.Type() == ErrTypeNotEligible:
			require.NoError(t, submitErr)
			started++
		default:
			t.Fatalf("retire: %v; submit: %v", retireErr, submitErr)
		}
	}
	t.Logf("retired %d, started %d", retired, started)
}

func updateErr(ctx context.Context, c client.Client, wfID, name, id string, arg any) error {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: wfID, UpdateID: id, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return err
	}
	return h.Get(ctx, nil)
}
