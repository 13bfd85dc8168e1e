package http_test

import (
	"context"
	"errors"
	"time"

	"hxd/internal/agent"
	hxhttp "hxd/internal/http"
	hxruntime "hxd/internal/runtime"
)

// errNotStubbed is what a fakeService method returns when its Func is nil.
var errNotStubbed = errors.New("fake service: method not stubbed")

// fakeService is a hand-written hxhttp.Service: each method calls its
// Func field when set, else fails with errNotStubbed. Set the fields before
// the first request.
type fakeService struct {
	ReadyFunc         func(ctx context.Context) error
	AgentsFunc        func() []*agent.Definition
	AgentFunc         func(name, version string) (*agent.Definition, error)
	CreateSessionFunc func(ctx context.Context, p hxruntime.CreateSessionParams) (*hxruntime.Session, error)
	ListSessionsFunc  func(ctx context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error)
	GetSessionFunc    func(ctx context.Context, sessionID string) (*hxruntime.Session, error)
	SubmitRunFunc     func(ctx context.Context, p hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error)
	WaitRunFunc       func(ctx context.Context, runID string, d time.Duration) (*hxruntime.RunResult, error)
	ListRunsFunc      func(ctx context.Context, sessionID string, p hxruntime.ListParams) (hxruntime.Page[hxruntime.RunResult], error)
	GetRunFunc        func(ctx context.Context, runID string) (*hxruntime.RunResult, error)
	RunTimelineFunc   func(ctx context.Context, runID string) (*hxruntime.RunTimeline, error)
	ListEventsFunc    func(ctx context.Context, runID string, after int64, limit int) ([]hxruntime.RunEvent, error)
	WatchRunFunc      func(runID string) (<-chan struct{}, func())
	PauseFunc         func(ctx context.Context, sessionID string) (*hxruntime.RunResult, error)
	CancelFunc        func(ctx context.Context, sessionID string) (*hxruntime.RunResult, error)
	ResumeFunc        func(ctx context.Context, sessionID string, p hxruntime.ResumeParams) (string, error)
	PendingFunc       func(ctx context.Context, sessionID string) ([]hxruntime.PendingTool, error)
	ApproveFunc       func(ctx context.Context, p hxruntime.ApproveParams) (*hxruntime.RunResult, error)
	ResolveFunc       func(ctx context.Context, p hxruntime.ResolveParams) (*hxruntime.RunResult, error)
	ExportFunc        func(ctx context.Context, runID string, fn func(*hxruntime.Incident) error) error
	ArtifactFunc      func(ctx context.Context, sha256 string) ([]byte, error)
}

var _ hxhttp.Service = (*fakeService)(nil)

func (f *fakeService) Ready(ctx context.Context) error {
	if f.ReadyFunc == nil {
		return errNotStubbed
	}
	return f.ReadyFunc(ctx)
}

func (f *fakeService) Agents() []*agent.Definition {
	if f.AgentsFunc == nil {
		return nil
	}
	return f.AgentsFunc()
}

func (f *fakeService) Agent(name, version string) (*agent.Definition, error) {
	if f.AgentFunc == nil {
		return nil, errNotStubbed
	}
	return f.AgentFunc(name, version)
}

func (f *fakeService) CreateSession(ctx context.Context, p hxruntime.CreateSessionParams) (*hxruntime.Session, error) {
	if f.CreateSessionFunc == nil {
		return nil, errNotStubbed
	}
	return f.CreateSessionFunc(ctx, p)
}

func (f *fakeService) ListSessions(ctx context.Context, p hxruntime.SessionListParams) (hxruntime.Page[hxruntime.Session], error) {
	if f.ListSessionsFunc == nil {
		return hxruntime.Page[hxruntime.Session]{}, errNotStubbed
	}
	return f.ListSessionsFunc(ctx, p)
}

func (f *fakeService) GetSession(ctx context.Context, sessionID string) (*hxruntime.Session, error) {
	if f.GetSessionFunc == nil {
		return nil, errNotStubbed
	}
	return f.GetSessionFunc(ctx, sessionID)
}

func (f *fakeService) SubmitRun(ctx context.Context, p hxruntime.SubmitParams) (*hxruntime.RunResult, bool, error) {
	if f.SubmitRunFunc == nil {
		return nil, false, errNotStubbed
	}
	return f.SubmitRunFunc(ctx, p)
}

func (f *fakeService) WaitRun(ctx context.Context, runID string, d time.Duration) (*hxruntime.RunResult, error) {
	if f.WaitRunFunc == nil {
		return nil, errNotStubbed
	}
	return f.WaitRunFunc(ctx, runID, d)
}

func (f *fakeService) ListRuns(ctx context.Context, sessionID string, p hxruntime.ListParams) (hxruntime.Page[hxruntime.RunResult], error) {
	if f.ListRunsFunc == nil {
		return hxruntime.Page[hxruntime.RunResult]{}, errNotStubbed
	}
	return f.ListRunsFunc(ctx, sessionID, p)
}

func (f *fakeService) RunTimeline(ctx context.Context, runID string) (*hxruntime.RunTimeline, error) {
	if f.RunTimelineFunc == nil {
		return nil, errNotStubbed
	}
	return f.RunTimelineFunc(ctx, runID)
}

func (f *fakeService) GetRun(ctx context.Context, runID string) (*hxruntime.RunResult, error) {
	if f.GetRunFunc == nil {
		return nil, errNotStubbed
	}
	return f.GetRunFunc(ctx, runID)
}

func (f *fakeService) ListEvents(ctx context.Context, runID string, after int64, limit int) ([]hxruntime.RunEvent, error) {
	if f.ListEventsFunc == nil {
		return nil, errNotStubbed
	}
	return f.ListEventsFunc(ctx, runID, after, limit)
}

func (f *fakeService) WatchRun(runID string) (<-chan struct{}, func()) {
	if f.WatchRunFunc == nil {
		return make(chan struct{}), func() {}
	}
	return f.WatchRunFunc(runID)
}

func (f *fakeService) Pause(ctx context.Context, sessionID string) (*hxruntime.RunResult, error) {
	if f.PauseFunc == nil {
		return nil, errNotStubbed
	}
	return f.PauseFunc(ctx, sessionID)
}

func (f *fakeService) Cancel(ctx context.Context, sessionID string) (*hxruntime.RunResult, error) {
	if f.CancelFunc == nil {
		return nil, errNotStubbed
	}
	return f.CancelFunc(ctx, sessionID)
}

func (f *fakeService) Resume(ctx context.Context, sessionID string, p hxruntime.ResumeParams) (string, error) {
	if f.ResumeFunc == nil {
		return "", errNotStubbed
	}
	return f.ResumeFunc(ctx, sessionID, p)
}

func (f *fakeService) Pending(ctx context.Context, sessionID string) ([]hxruntime.PendingTool, error) {
	if f.PendingFunc == nil {
		return nil, errNotStubbed
	}
	return f.PendingFunc(ctx, sessionID)
}

func (f *fakeService) Approve(ctx context.Context, p hxruntime.ApproveParams) (*hxruntime.RunResult, error) {
	if f.ApproveFunc == nil {
		return nil, errNotStubbed
	}
	return f.ApproveFunc(ctx, p)
}

func (f *fakeService) Resolve(ctx context.Context, p hxruntime.ResolveParams) (*hxruntime.RunResult, error) {
	if f.ResolveFunc == nil {
		return nil, errNotStubbed
	}
	return f.ResolveFunc(ctx, p)
}

func (f *fakeService) Export(ctx context.Context, runID string, fn func(*hxruntime.Incident) error) error {
	if f.ExportFunc == nil {
		return errNotStubbed
	}
	return f.ExportFunc(ctx, runID, fn)
}

func (f *fakeService) Artifact(ctx context.Context, sha256 string) ([]byte, error) {
	if f.ArtifactFunc == nil {
		return nil, errNotStubbed
	}
	return f.ArtifactFunc(ctx, sha256)
}
