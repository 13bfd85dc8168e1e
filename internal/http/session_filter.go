package http

import (
	"regexp"
	"strings"

	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// agentFilterRE is the contract's form of GET /sessions?agent=: a name, or
// name@version, each as an agent reference allows.
var agentFilterRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}(@[A-Za-z0-9._-]{1,64})?$`)

// sessionListParams converts GET /sessions' paging and filter parameters.
// The request validator already refuses values outside the contract; they
// are checked again here so that the handler never passes one on.
func sessionListParams(p api.ListSessionsParams) (hxruntime.SessionListParams, error) {
	out := hxruntime.SessionListParams{ListParams: listParams(p.Cursor, p.Limit)}
	if p.Agent != nil {
		if !agentFilterRE.MatchString(*p.Agent) {
			return out, badRequest("agent must be name or name@version")
		}
		out.AgentName, out.AgentVersion, _ = strings.Cut(*p.Agent, "@")
	}
	if p.Status != nil {
		switch st := *p.Status; {
		case st == api.ListSessionsParamsStatusNone:
			out.NoRun = true
		case st.Valid():
			out.Status = hxruntime.RunStatus(st)
		default:
			return out, badRequest("status must be a run status or none")
		}
	}
	return out, nil
}
