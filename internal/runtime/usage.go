package runtime

import "hxd/internal/model"

// Usage accounting of model attempts (REFERENCE §1: the run state's usage
// and usage_base; §4.1: usage_incomplete). Pure: shared by the local
// driver and any engine that makes model attempts.

// BeginAttemptUsage opens the accounting of a new model attempt: the
// run's usage so far becomes its usage_base.
func BeginAttemptUsage(st *RunState) { st.UsageBase = st.Usage }

// AccountAttemptUsage sets the run's usage to its usage_base plus what the
// provider reported for the current attempt, u. Accounting the same
// attempt again (a later, fuller report of it) replaces the attempt's
// share instead of adding to it. An answer whose provider reported no
// usage (reported false: model.Response.UsageReported) marks the run's
// usage incomplete, whatever the provider, scripted included.
func AccountAttemptUsage(st *RunState, u model.Usage, reported bool) {
	st.Usage = st.UsageBase.Add(u)
	if !reported {
		st.UsageIncomplete = true
	}
}
