package temporal

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/agent"
	"hxd/internal/runtime"
)

// Retention (issue 23) on the workflow side: the retire update ends a
// session whose latest run finished, atomically with respect to the other
// updates (a workflow runs its handlers one at a time), so that no run can
// start between the sweeper's check and the session's end.
const (
	// UpdateRetire retires the session for deletion: arg RetireRequest,
	// result RetireResult. Its validator refuses (ErrTypeNotEligible,
	// nothing written to the history) unless the latest run is completed
	// or cancelled, no run is unfinished or driven, and the latest run
	// was last updated before FinishedBefore. Once retired, the workflow
	// refuses every other update, answers every query but get_retired
	// with ErrTypeNotFound, waits for its handlers and publishes, and
	// completes. A retire of a retired session answers the same result.
	UpdateRetire = "retire"
	// QueryGetRetired returns the RetireResult (Retired false when the
	// session is not retired); it also answers on the completed workflow.
	QueryGetRetired = "get_retired"
	// ErrTypeNotEligible: the retire update's refusal.
	ErrTypeNotEligible = "HarnessNotEligible"
)

// RetireRequest is the retire update's argument.
type RetireRequest struct {
	// FinishedBefore: the latest run must have been last updated before it.
	FinishedBefore time.Time `json:"finished_before"`
}

// RetireResult says what a retired session held: what the sweeper deletes
// and the tombstones it writes.
type RetireResult struct {
	Retired   bool      `json:"retired"`
	SessionID string    `json:"session_id"`
	Owner     string    `json:"owner"`
	Agent     agent.Ref `json:"agent"`
	// FinishedAt is the latest run's last update.
	FinishedAt time.Time    `json:"finished_at"`
	Runs       []RetiredRun `json:"runs"`
}

// RetiredRun is one run of a retired session.
type RetiredRun struct {
	RunID     string `json:"run_id"`
	RequestID string `json:"request_id"`
}

// errRetired answers everything but get_retired once retired.
func errRetired() error {
	return newAppError(runtime.ErrNotFound, "session not found")
}

func notEligible(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeNotEligible, nil)
}

// registerRetire installs the retire update and the get_retired query.
func (w *sessionWorkflow) registerRetire(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryGetRetired, func() (RetireResult, error) {
		if w.retired == nil {
			return RetireResult{}, nil
		}
		return *w.retired, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateRetire, w.retire,
		workflow.UpdateHandlerOptions{Validator: w.validateRetire})
}

func (w *sessionWorkflow) validateRetire(_ workflow.Context, req RetireRequest) error {
	if w.retired != nil {
		return nil
	}
	rec := w.latest()
	switch {
	case rec == nil:
		return notEligible("session has no run")
	case w.s.Active != nil || w.drive != nil:
		return notEligible("session has an unfinished run")
	case !rec.State.Status.Finished():
		return notEligible("latest run is " + string(rec.State.Status))
	case !rec.UpdatedAt.Before(req.FinishedBefore):
		return notEligible("latest run finished too recently")
	}
	return nil
}

func (w *sessionWorkflow) retire(ctx workflow.Context, req RetireRequest) (RetireResult, error) {
	if err := w.validateRetire(ctx, req); err != nil {
		return RetireResult{}, err
	}
	if w.retired == nil {
		res := RetireResult{
			Retired: true, SessionID: w.s.SessionID, Owner: w.s.Owner, Agent: w.s.Agent,
			FinishedAt: w.latest().UpdatedAt, Runs: make([]RetiredRun, 0, len(w.s.RunOrder)),
		}
		for _, id := range w.s.RunOrder {
			r := RetiredRun{RunID: id}
			if rec := w.s.Runs[id]; rec != nil {
				r.RequestID = rec.State.RequestID
			}
			res.Runs = append(res.Runs, r)
		}
		w.retired = &res
	}
	return *w.retired, nil
}
