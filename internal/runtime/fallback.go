package runtime

import (
	"context"
	"fmt"

	"hxd/internal/agent"
	"hxd/internal/model"
)

// Model fallback chains (issue 20, item 4; hxd's rule, REFERENCE has no
// section on it). An agent's chain is [model, model.fallback...]:
//
//   - each model gets the agent's retry policy: a transient failure is
//     retried on the same model, with the usual backoff and `waiting`,
//     until that model has made retry.attempts attempts of the step;
//   - a transient failure of a model whose attempts are used up moves the
//     step to the next model of the chain at once: no backoff and no
//     `waiting` (the next model is another deployment or provider, which
//     the first one's overload says nothing about); the failed attempt's
//     model.failed is committed with the move;
//   - a permanent failure, or a transient one of the last model, fails
//     the run as without a chain;
//   - each try is an attempt of its own, numbered on from the step's
//     previous one (state.attempt keeps growing; attempt_reset as for any
//     retry); its model.started request names its model;
//   - the position is stored in the run state (model_index, and
//     model_base: the step's attempts made before that model's first), so
//     a resumed run goes on with the model it was on; every new step
//     starts again at the primary model (PrepareModel);
//   - model.response of an agent with a chain carries the provider and
//     model that answered; an agent without one writes it as before.

// ChainPosition is where the current model step stands in its agent's
// model chain. Both fields are 0 (and left out of the stored state) on the
// primary model, so the state of an agent without a chain is unchanged.
type ChainPosition struct {
	// ModelIndex is the position of the step's current model: 0 for the
	// agent's model, i for its fallback entry i-1.
	ModelIndex int `json:"model_index,omitempty"`
	// ModelBase is the number of the step's attempts made before the
	// current model's first.
	ModelBase int `json:"model_base,omitempty"`
}

// ChainLen is the number of models in def's chain.
func ChainLen(def *agent.Definition) int { return 1 + len(def.Model.Fallback) }

// ChainModel returns the model section at position i of def's chain (the
// primary's without its fallback list); the primary's for a position
// outside the chain.
func ChainModel(def *agent.Definition, i int) model.Config {
	m, err := def.Model.ChainAt(i)
	if err != nil {
		m, _ = def.Model.ChainAt(0)
	}
	return m
}

// ModelAttempt is the number of the current step's attempts made on the
// current model, the current attempt included.
func ModelAttempt(st *RunState) int { return st.Attempt - st.ModelBase }

// RetrySameModel reports whether failure f of the current attempt is
// retried on the same model: it is transient and the model has attempts
// of the agent's retry policy left.
func RetrySameModel(def *agent.Definition, st *RunState, f *model.Failure) bool {
	return f.Retryable && def.Retry != nil && ModelAttempt(st) < def.Retry.Attempts
}

// FallBack moves st to the next model of def's chain after failure f of
// the current attempt, when f is transient and there is a next model, and
// reports whether it did. Call it once RetrySameModel said no.
func FallBack(def *agent.Definition, st *RunState, f *model.Failure) bool {
	if !f.Retryable || st.ModelIndex+1 >= ChainLen(def) {
		return false
	}
	st.ModelIndex++
	st.ModelBase = st.Attempt
	return true
}

// AnsweredBy is the model.response payload of an agent with a fallback
// chain: the response with the provider and model that answered.
type AnsweredBy struct {
	*model.Response
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// ResponsePayload is the model.response payload of resp, answered by the
// current model of st: resp itself for an agent without a fallback chain
// (its records keep their shape), else resp with the provider and model
// (AnsweredBy).
func ResponsePayload(def *agent.Definition, st *RunState, resp *model.Response) any {
	if ChainLen(def) == 1 {
		return resp
	}
	m := ChainModel(def, st.ModelIndex)
	return AnsweredBy{Response: resp, Provider: m.Provider, Model: m.Model}
}

// BindFallbacks builds the providers of def's fallback entries, in order
// (the primary's is the binding's provider). Both engines bind with it.
func BindFallbacks(def *agent.Definition, opts model.Options) ([]model.Provider, error) {
	out := make([]model.Provider, 0, len(def.Model.Fallback))
	for i, m := range def.Model.Fallback {
		p, err := model.New(m, opts)
		if err != nil {
			return nil, fmt.Errorf("fallback[%d]: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// modelProvider is the provider of the step's current model.
func (d *driver) modelProvider() model.Provider {
	if i := d.st.ModelIndex; i > 0 && i <= len(d.b.fallbacks) {
		return d.b.fallbacks[i-1]
	}
	return d.b.provider
}

// fallBack commits the failed attempt with the move to the next model
// (FallBack moved st already); the loop then makes the next attempt.
func (d *driver) fallBack(ctx context.Context) error {
	return d.commit(ctx)
}
