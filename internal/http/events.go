package http

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"hxd/internal/http/api"
	hxruntime "hxd/internal/runtime"
)

// eventBatch is how many events one ListEvents call asks for (the
// service's maximum).
const eventBatch = 1000

// ListRunEvents answers a run's events after a cursor: a JSON page when
// the client accepts application/json (and prefers it to
// text/event-stream), else a server-sent event stream. An unknown run is a
// 404 before any byte of a stream is written.
func (s *Server) ListRunEvents(ctx context.Context, req api.ListRunEventsRequestObject) (api.ListRunEventsResponseObject, error) {
	after, err := startCursor(req.Params.After, req.Params.LastEventID)
	if err != nil {
		return nil, err
	}
	if _, err := s.svc.GetRun(ctx, req.RunId); err != nil {
		return nil, err
	}
	if !prefersJSON(acceptFrom(ctx)) {
		r, _ := httpRequestFrom(ctx)
		head := r != nil && r.Method == http.MethodHead
		st := &eventStream{s: s, runID: req.RunId, after: after, head: head}
		return eventStreamResponse(func(w http.ResponseWriter) error { return st.visit(ctx, w) }), nil
	}
	page, err := s.eventPage(ctx, req.RunId, after, deref(req.Params.Limit))
	if err != nil {
		return nil, err
	}
	return api.ListRunEvents200JSONResponse(page), nil
}

// eventPage is the JSON form: up to limit (0 → 1000) events after the
// cursor; next_cursor is the last one's cursor, or after when none.
func (s *Server) eventPage(ctx context.Context, runID string, after int64, limit int) (api.EventPage, error) {
	if limit <= 0 {
		limit = eventBatch
	}
	evs, err := s.svc.ListEvents(ctx, runID, after, limit)
	if err != nil {
		return api.EventPage{}, err
	}
	page := api.EventPage{Events: make([]api.RunEvent, 0, len(evs)), NextCursor: strconv.FormatInt(after, 10)}
	for _, ev := range evs {
		out, err := eventOut(ev)
		if err != nil {
			return api.EventPage{}, err
		}
		page.Events = append(page.Events, out)
		page.NextCursor = ev.Cursor
	}
	return page, nil
}

// startCursor is Last-Event-ID when given, else after, else 0.
func startCursor(after, lastEventID *string) (int64, error) {
	name, v := "after", after
	if lastEventID != nil {
		name, v = "Last-Event-ID", lastEventID
	}
	if v == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(*v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(fmt.Sprintf("%s is not an event cursor", name))
	}
	return n, nil
}

// wireEvent is a RunEvent as the JSON page and the stream send it: the
// contract's RunEvent is a union discriminated by type, whose generated Go
// type holds the encoded event; data goes out as committed.
type wireEvent struct {
	AttemptID string          `json:"attempt_id"`
	CreatedAt string          `json:"created_at"`
	Cursor    string          `json:"cursor"`
	Data      json.RawMessage `json:"data"`
	EventID   string          `json:"event_id"`
	RunID     string          `json:"run_id"`
	SessionID string          `json:"session_id"`
	StepID    string          `json:"step_id"`
	Type      string          `json:"type"`
}

// eventJSON encodes one event in its wire form.
func eventJSON(ev hxruntime.RunEvent) ([]byte, error) {
	data := ev.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	b, err := json.Marshal(wireEvent{
		AttemptID: ev.AttemptID,
		CreatedAt: ev.CreatedAt.UTC().Format(time.RFC3339Nano),
		Cursor:    ev.Cursor,
		Data:      data,
		EventID:   ev.EventID,
		RunID:     ev.RunID,
		SessionID: ev.SessionID,
		StepID:    ev.StepID,
		Type:      ev.Type,
	})
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.EventID, err)
	}
	return b, nil
}

// eventOut is one event as the contract's RunEvent.
func eventOut(ev hxruntime.RunEvent) (api.RunEvent, error) {
	var out api.RunEvent
	b, err := eventJSON(ev)
	if err != nil {
		return out, err
	}
	if err := out.UnmarshalJSON(b); err != nil {
		return out, fmt.Errorf("event %s: %w", ev.EventID, err)
	}
	return out, nil
}

type (
	httpRequestKey    struct{}
	responseWriterKey struct{}
)

// withHTTPRequest hands the raw request and response writer to the few
// operations that need more than the contract can declare: listRunEvents
// (the Accept header), getMetrics (promhttp negotiates the format itself),
// verifyBundle and playbackBundle (the declared Content-Length of the
// upload, and Connection: close when they leave it unread).
func withHTTPRequest(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
	switch operationID {
	case "ListRunEvents", "GetMetrics", "VerifyBundle", "PlaybackBundle":
	default:
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		ctx = context.WithValue(context.WithValue(ctx, httpRequestKey{}, r), responseWriterKey{}, w)
		return f(ctx, w, r, req)
	}
}

// httpRequestFrom returns the request put into ctx by withHTTPRequest.
func httpRequestFrom(ctx context.Context) (*http.Request, bool) {
	r, ok := ctx.Value(httpRequestKey{}).(*http.Request)
	return r, ok
}

// responseWriterFrom returns the response writer put into ctx by
// withHTTPRequest.
func responseWriterFrom(ctx context.Context) (http.ResponseWriter, bool) {
	w, ok := ctx.Value(responseWriterKey{}).(http.ResponseWriter)
	return w, ok
}

func acceptFrom(ctx context.Context) string {
	if r, ok := httpRequestFrom(ctx); ok {
		return r.Header.Get("Accept")
	}
	return ""
}

// prefersJSON reports whether an Accept header asks for application/json
// with a higher quality than text/event-stream (wildcards count for
// neither, so the stream is the default).
func prefersJSON(accept string) bool {
	qJSON, qSSE := -1.0, -1.0
	for _, part := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case "application/json":
			qJSON = max(qJSON, q)
		case "text/event-stream":
			qSSE = max(qSSE, q)
		}
	}
	return qJSON > 0 && qJSON > qSSE
}

// eventStreamResponse is the text/event-stream answer of listRunEvents.
// The strict server's Visit methods receive no context, so the handler
// returns a closure over its ctx, which the generated code calls before
// the request ends.
type eventStreamResponse func(w http.ResponseWriter) error

// VisitListRunEventsResponse implements api.ListRunEventsResponseObject.
func (f eventStreamResponse) VisitListRunEventsResponse(w http.ResponseWriter) error { return f(w) }

// eventStream is the text/event-stream form of listRunEvents. It writes
// one frame per event and flushes after each (the generated stream
// response copies without flushing); it lives only as long as the
// request, whose ctx its methods take.
type eventStream struct {
	s     *Server
	runID string
	after int64
	// head: the request is a HEAD; the stream's headers are the answer.
	head bool
	// lastType is the type of the last event written.
	lastType string
}

// eventLagger is implemented by a Service whose event stream may lag the
// run status GetRun reports: the Temporal engine publishes a stopped
// run's settled events (run_result last) after the workflow state
// changed, and a gap event (cursor 0) stands for history it cannot read.
type eventLagger interface {
	// EventLag is how long a stream of a stopped run waits for its
	// run_result event before it ends anyway.
	EventLag() time.Duration
}

// visit writes the stream, until the run settles or ctx (the request's)
// ends. Once the headers are out, failures end the stream (logged once);
// the client reconnects with Last-Event-ID.
func (e *eventStream) visit(ctx context.Context, w http.ResponseWriter) error {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's WriteTimeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if e.head {
		return nil // no body to stream, so nothing to wait for
	}
	err := rc.Flush()
	if err == nil {
		err = e.stream(ctx, w, rc)
	}
	if err != nil && ctx.Err() == nil {
		e.s.log.WarnContext(ctx, "event stream ended early",
			"request_id", requestIDFrom(ctx), "run_id", e.runID, "error", err)
	}
	return nil
}

// stream writes every event after e.after, waiting for new commits while
// the run is running. It returns nil once the run is not running and every
// event committed up to its run_result has been written (the terminal
// status and its run_result commit together, so reading the status before
// draining the events suffices).
//
// With a Service whose events lag the run's status (eventLagger), a
// stopped run's stream waits up to that lag for the run_result event
// before it ends.
func (e *eventStream) stream(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController) error {
	keepAlive := time.NewTicker(e.s.keepAlive)
	defer keepAlive.Stop()
	var lag time.Duration
	if l, ok := e.s.svc.(eventLagger); ok {
		lag = l.EventLag()
	}
	var stoppedAt time.Time
	after := e.after
	for {
		changed, release := e.s.svc.WatchRun(e.runID) // before reading: no commit is missed
		run, err := e.s.svc.GetRun(ctx, e.runID)
		if err == nil {
			after, err = e.drain(ctx, w, rc, after)
		}
		if err != nil {
			release()
			return err
		}
		if run.Status != hxruntime.StatusRunning {
			settled := e.lastType == hxruntime.EventRunResult || e.lastType == hxruntime.EventGap
			if stoppedAt.IsZero() {
				stoppedAt = time.Now()
				if !settled && lag == 0 {
					// The drain went past the run_result that goes with
					// the status read: a resume committed in between, so
					// the status is stale. Read it again.
					release()
					continue
				}
			}
			if settled || time.Since(stoppedAt) >= lag {
				release()
				return nil
			}
		} else {
			stoppedAt = time.Time{}
		}
		err = e.wait(ctx, w, rc, changed, keepAlive.C)
		release()
		if err != nil {
			return err
		}
	}
}

// drain writes the events after cursor, batch by batch, and returns the
// last cursor written.
func (e *eventStream) drain(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, after int64) (int64, error) {
	for {
		evs, err := e.s.svc.ListEvents(ctx, e.runID, after, eventBatch)
		if err != nil {
			return after, err
		}
		for _, ev := range evs {
			n, err := strconv.ParseInt(ev.Cursor, 10, 64)
			if err != nil {
				return after, fmt.Errorf("event %s: bad cursor: %w", ev.EventID, err)
			}
			// Consecutive gap events (Redis unreachable on every read)
			// are written once.
			if ev.Type == hxruntime.EventGap && e.lastType == hxruntime.EventGap {
				after = n
				continue
			}
			if err := writeFrame(w, ev); err != nil {
				return after, err
			}
			if err := rc.Flush(); err != nil {
				return after, err
			}
			after = n
			e.lastType = ev.Type
		}
		if len(evs) < eventBatch {
			return after, nil
		}
	}
}

// wait returns when the run changes, sending keep-alive comments
// meanwhile; ctx's error when the client goes away.
func (e *eventStream) wait(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, changed <-chan struct{}, tick <-chan time.Time) error {
	for {
		select {
		case <-changed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
		}
	}
}

// writeFrame writes one SSE frame: id = cursor, event = type, data = the
// RunEvent as one line of JSON.
func writeFrame(w http.ResponseWriter, ev hxruntime.RunEvent) error {
	data, err := eventJSON(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", sseField(ev.Cursor), sseField(ev.Type), data)
	return err
}

// sseField drops line breaks, which would end an SSE field early.
func sseField(s string) string {
	return strings.NewReplacer("\r", "", "\n", "").Replace(s)
}
