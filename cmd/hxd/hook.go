package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	hxruntime "hxd/internal/runtime"
)

// This file holds the --checkpoint-hook notifier (DESIGN §9): every
// checkpoint is POSTed to an operator URL as {session_id, run_id, status,
// phase}, at least once, in the background, never blocking or failing a run.

// errHookStopped is the cause of the notifier's cancellation at Stop; it
// tells shutdown apart from a delivery failure.
var errHookStopped = errors.New("checkpoint hook stopped")

// checkpoint is one notification; its JSON is the POST body.
type checkpoint struct {
	SessionID string              `json:"session_id"`
	RunID     string              `json:"run_id"`
	Status    hxruntime.RunStatus `json:"status"`
	Phase     hxruntime.Phase     `json:"phase"`
}

// hookConfig configures a checkpointHook.
type hookConfig struct {
	// URL receives the POSTs; an absolute http or https URL. Required.
	URL string
	// Logger, default: logs are discarded.
	Logger *slog.Logger
	// Transport sends the requests, default: a clone of
	// http.DefaultTransport whose idle connections are closed at Stop.
	Transport http.RoundTripper
	// RequestTimeout bounds one POST, default: 10s.
	RequestTimeout time.Duration
	// MaxElapsed bounds the retries of one notification, after which it is
	// logged and dropped, default: 1m.
	MaxElapsed time.Duration
	// MinBackoff is the wait after the first failed attempt; it doubles per
	// attempt, default: 200ms.
	MinBackoff time.Duration
	// MaxBackoff caps the wait between attempts, default: 10s.
	MaxBackoff time.Duration
	// MaxQueue bounds the notifications waiting in memory; beyond it the
	// oldest is dropped (and logged), default: 10000.
	MaxQueue int
}

// validateHookURL checks a --checkpoint-hook value: an absolute http or
// https URL with a host. The error names the flag, never the URL's
// credentials.
func validateHookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("--checkpoint-hook must be an absolute http or https URL: it does not parse")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--checkpoint-hook must be an absolute http or https URL, not %q", u.Redacted())
	}
	return nil
}

// checkpointHook delivers checkpoints to the operator URL from one
// background goroutine, in the order they were noted. Notify never blocks;
// Start and Stop bracket the delivery loop (STYLE G13).
type checkpointHook struct {
	cfg       hookConfig
	target    string // URL for logs, password redacted
	client    *http.Client
	transport *http.Transport // owned; nil when cfg.Transport was given
	log       *slog.Logger

	mu       sync.Mutex
	queue    []checkpoint
	dropped  int  // dropped since the last overflow report
	overflow bool // the queue is full; one warning per overflow
	draining bool // Stop was called: exit once the queue is empty
	wake     chan struct{}

	cancel context.CancelCauseFunc
	done   chan struct{}
}

// newCheckpointHook returns a stopped notifier for cfg.URL (validate it
// with validateHookURL first).
func newCheckpointHook(cfg hookConfig) *checkpointHook {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.MaxElapsed <= 0 {
		cfg.MaxElapsed = time.Minute
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 10000
	}
	h := &checkpointHook{cfg: cfg, target: cfg.URL, log: cfg.Logger.With("component", "checkpoint_hook"), wake: make(chan struct{}, 1)}
	if u, err := url.Parse(cfg.URL); err == nil {
		h.target = u.Redacted()
	}
	rt := cfg.Transport
	if rt == nil {
		h.transport = http.DefaultTransport.(*http.Transport).Clone()
		rt = h.transport
	}
	// A redirect is a misconfiguration: report its status instead of
	// turning the POST into a GET elsewhere.
	h.client = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return h
}

// Notify queues a checkpoint and returns at once; it is the runtime's
// CheckpointFunc. A full queue drops its oldest notification; after Stop
// notifications are dropped.
func (h *checkpointHook) Notify(sessionID, runID string, status hxruntime.RunStatus, phase hxruntime.Phase) {
	cp := checkpoint{SessionID: sessionID, RunID: runID, Status: status, Phase: phase}
	h.mu.Lock()
	if h.draining && h.done == nil {
		h.mu.Unlock()
		return
	}
	var lost checkpoint
	warn := false
	if len(h.queue) >= h.cfg.MaxQueue {
		lost = h.queue[0]
		h.queue[0] = checkpoint{}
		h.queue = h.queue[1:]
		h.dropped++
		warn = !h.overflow
		h.overflow = true
	}
	h.queue = append(h.queue, cp)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	if warn {
		h.log.Warn("checkpoint hook queue full: dropping the oldest notifications",
			"max_queue", h.cfg.MaxQueue, "session_id", lost.SessionID, "run_id", lost.RunID)
	}
}

// Start launches the delivery loop. The loop keeps ctx's values but not its
// cancellation: it ends at Stop, so a shutdown signal does not lose the
// notifications still queued.
func (h *checkpointHook) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done != nil || h.draining {
		return errors.New("checkpoint hook already started")
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	h.cancel, h.done = cancel, make(chan struct{})
	go h.loop(ctx, h.done)
	return nil
}

// Stop delivers what is queued until ctx ends, then cancels the delivery
// in flight with errHookStopped, waits for the loop to exit and logs how
// many notifications were left undelivered. Safe to call more than once
// and without Start.
func (h *checkpointHook) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	done, cancel := h.done, h.cancel
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			cancel(errHookStopped)
			<-done
		}
		cancel(errHookStopped)
	}
	h.mu.Lock()
	left := len(h.queue)
	h.queue = nil
	h.done = nil
	h.mu.Unlock()
	if h.transport != nil {
		h.transport.CloseIdleConnections()
	}
	if left > 0 {
		h.log.WarnContext(ctx, "checkpoint hook stopped before delivering every notification", "undelivered", left)
	}
	return nil
}

// loop delivers queued notifications one at a time, oldest first, until
// Stop drains the queue or cancels ctx.
func (h *checkpointHook) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		cp, ok := h.next(ctx)
		if !ok {
			return
		}
		h.deliver(ctx, cp)
	}
}

// next returns the oldest queued notification, waiting for one; false once
// the loop must end (stopping with an empty queue, or cancelled).
func (h *checkpointHook) next(ctx context.Context) (checkpoint, bool) {
	for {
		h.mu.Lock()
		if len(h.queue) > 0 {
			cp := h.queue[0]
			h.queue[0] = checkpoint{}
			h.queue = h.queue[1:]
			if len(h.queue) == 0 {
				h.queue = nil // release the backing array
			}
			dropped, recovered := h.dropped, h.overflow && len(h.queue) < h.cfg.MaxQueue/2
			if recovered {
				h.dropped, h.overflow = 0, false
			}
			h.mu.Unlock()
			if recovered {
				h.log.WarnContext(ctx, "checkpoint hook queue recovered", "dropped", dropped)
			}
			return cp, true
		}
		draining := h.draining
		h.mu.Unlock()
		if draining || ctx.Err() != nil {
			return checkpoint{}, false
		}
		select {
		case <-h.wake:
		case <-ctx.Done():
			return checkpoint{}, false
		}
	}
}

// deliver POSTs one notification, retrying network errors and non-2xx
// answers with capped exponential backoff (downward jitter) for at most
// MaxElapsed; then, or when ctx ends, it logs and drops it.
func (h *checkpointHook) deliver(ctx context.Context, cp checkpoint) {
	body, err := json.Marshal(cp)
	if err != nil { // plain strings: cannot happen
		h.log.ErrorContext(ctx, "encode checkpoint notification", "error", err)
		return
	}
	base := h.log.With("session_id", cp.SessionID, "run_id", cp.RunID, "status", cp.Status, "phase", cp.Phase)
	deadline := time.Now().Add(h.cfg.MaxElapsed)
	wait := h.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		code, err := h.post(ctx, body)
		if err == nil {
			if attempt > 1 {
				base.DebugContext(ctx, "checkpoint notification delivered after retries", "attempt", attempt)
			}
			return
		}
		log := base.With("attempt", attempt, "error", err)
		if code != 0 {
			log = log.With("http_status", code)
		}
		if ctx.Err() != nil {
			log.WarnContext(ctx, "checkpoint notification dropped at shutdown")
			return
		}
		// Downward jitter: wait in [wait/2, wait].
		d := wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
		if time.Now().Add(d).After(deadline) {
			log.WarnContext(ctx, "checkpoint notification dropped: the receiver kept failing", "url", h.target)
			return
		}
		log.DebugContext(ctx, "checkpoint notification failed; retrying", "backoff", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.WarnContext(ctx, "checkpoint notification dropped at shutdown")
			return
		}
		wait = min(2*wait, h.cfg.MaxBackoff)
	}
}

// post sends one attempt bounded by the request timeout and returns the
// answer's status code (0 without an answer); the error is nil on a 2xx.
// Errors never carry the URL (it may hold a token).
func (h *checkpointHook) post(ctx context.Context, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("build request: invalid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hxd/"+version)
	resp, err := h.client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, fmt.Errorf("post: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, errors.New("receiver answered HTTP " + strconv.Itoa(resp.StatusCode))
	}
	return resp.StatusCode, nil
}
