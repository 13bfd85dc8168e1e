package temporal

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"hxd/internal/model"
	"hxd/internal/runtime"
)

// Model fallback chains on the Temporal engine, by the local engine's
// rule (internal/runtime/fallback.go): the model activity of each model
// of the chain is retried by Temporal per the agent's retry policy; once
// a transient failure has used up those attempts, the workflow moves the
// step to the next model (state model_index/model_base) and schedules its
// activity, whose attempts are numbered on; a permanent failure, or a
// transient one of the last model, fails the run. Each new step starts at
// the primary model. The move is behind PatchModelFallback.

// fallBack moves st to the next model of the chain after the model
// activity failed with err (the failure's last attempt already in
// st.Attempt) and reports whether it did.
func (w *sessionWorkflow) fallBack(ctx workflow.Context, err error, st *runtime.RunState) bool {
	if runtime.ChainLen(w.def) == 1 || !transientActivityFailure(err) {
		return false
	}
	if workflow.GetVersion(ctx, PatchModelFallback, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return false
	}
	return runtime.FallBack(w.def, st, &model.Failure{Retryable: true})
}

// transientActivityFailure reports whether a model activity ended with a
// failure worth another model: a retryable provider failure whose
// attempts ran out, or an activity timeout.
func transientActivityFailure(err error) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return !app.NonRetryable() && app.Type() != ErrTypeAgentMismatch
	}
	var te *temporal.TimeoutError
	return errors.As(err, &te)
}

// chainModel returns the provider and model section at position i of the
// agent's chain (the primary's for a position outside it).
func (b *binding) chainModel(i int) (model.Provider, model.Config) {
	if i > 0 && i <= len(b.fallbacks) {
		return b.fallbacks[i-1], runtime.ChainModel(b.def, i)
	}
	return b.provider, runtime.ChainModel(b.def, 0)
}
