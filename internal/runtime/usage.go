package runtime

import "hxd/internal/model"

// Usage accounting of model attempts (REFERENCE §1: the run state's usage
// and usage_base; §4.1: usage_incomplete). Pure: shared by the local
// driver and any engine that makes model attempts.

// UsageReported reports whether a provider's answer carried usage. A model
// call always reads input tokens, so an all-zero usage from a provider
// means it reported none (an OpenAI-compatible server may leave usage
// out). The scripted provider's usage is part of its script, zero when a
// step sets none (model.ScriptStep.Usage), so it always counts as
// reported.
func UsageReported(provider string, u model.Usage) bool {
	return provider == model.ProviderScripted || u != (model.Usage{})
}

// BeginAttemptUsage opens the accounting of a new model attempt: the
// run's usage so far becomes its usage_base.
func BeginAttemptUsage(st *RunState) { st.UsageBase = st.Usage }

// AccountAttemptUsage sets the run's usage to its usage_base plus what the
// provider reported for the current attempt, u. Accounting the same
// attempt again (a later, fuller report of it) replaces the attempt's
// share instead of adding to it. An answer without usage (UsageReported
// false for provider) marks the run's usage incomplete.
func AccountAttemptUsage(st *RunState, provider string, u model.Usage) {
	st.Usage = st.UsageBase.Add(u)
	if !UsageReported(provider, u) {
		st.UsageIncomplete = true
	}
}
