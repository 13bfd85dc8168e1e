package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"hxd/internal/telemetry/propagate"
)

// dialHTTP connects over streamable HTTP, then over legacy SSE on the same
// URL when streamable HTTP is refused.
func (c *conn) dialHTTP(ctx context.Context) (*link, error) {
	headers, err := c.headers()
	if err != nil {
		return nil, err
	}
	base := c.roundTripper()

	l, errStreamable := c.dialTransport(ctx, base, headers, TransportStreamableHTTP)
	if errStreamable == nil {
		return l, nil
	}
	if ctx.Err() != nil {
		return nil, c.unavailable("connect cancelled", ctx.Err())
	}
	c.m.opts.Logger.Debug("mcp streamable HTTP refused; trying SSE", "mcp_server", c.cfg.Name, "agent", c.agent, "error", c.scrub(errStreamable))
	l, errSSE := c.dialTransport(ctx, base, headers, TransportSSE)
	if errSSE == nil {
		return l, nil
	}
	return nil, c.unavailable("streamable HTTP and SSE both failed", errors.Join(errStreamable, errSSE))
}

// dialTransport opens one link over kind (streamable_http or sse). The
// link's requests, the SSE stream included, live until the link closes:
// ctx only bounds the connect.
func (c *conn) dialTransport(ctx context.Context, base http.RoundTripper, headers http.Header, kind string) (*link, error) {
	linkCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	client := &http.Client{
		Transport: &linkTransport{
			base: base, headers: headers, closing: linkCtx.Done(),
			afterClose: func(f func()) func() bool { return context.AfterFunc(linkCtx, f) },
		},
		// A redirect could carry the headers elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var t sdk.Transport
	if kind == TransportSSE {
		t = &sdk.SSEClientTransport{Endpoint: c.cfg.URL, HTTPClient: client, MaxEventSize: MaxReplyBytes}
	} else {
		t = &sdk.StreamableClientTransport{
			Endpoint: c.cfg.URL, HTTPClient: client, MaxEventSize: MaxReplyBytes,
			// hxd neither needs server-initiated messages nor resumes a
			// broken call stream: a broken call is reported as such.
			DisableStandaloneSSE: true, MaxRetries: -1,
		}
	}
	session, err := c.client().Connect(linkCtx, t, nil)
	stopped := stop()
	if err != nil || !stopped {
		cancel()
		if err == nil {
			_ = session.Close()
			err = ctx.Err()
		}
		return nil, err
	}
	return &link{session: session, transport: kind, cancel: cancel}, nil
}

// headers returns the headers of headers_env, read from the environment.
func (c *conn) headers() (http.Header, error) {
	h := http.Header{}
	for _, name := range sortedKeys(c.cfg.HeadersEnv) {
		envName := c.cfg.HeadersEnv[name]
		v, ok := c.m.opts.LookupEnvFunc(envName)
		if !ok {
			return nil, &UnavailableError{Server: c.cfg.Name, Reason: fmt.Sprintf("environment variable %s (headers_env.%s) is not set", envName, name)}
		}
		h.Set(name, v)
	}
	return h, nil
}

// roundTripper returns the connection's pooled transport (one per server,
// kept across reconnects).
func (c *conn) roundTripper() http.RoundTripper {
	c.httpOnce.Do(func() {
		if c.m.opts.HTTPTransport != nil {
			c.httpBase = c.m.opts.HTTPTransport
			return
		}
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			c.httpBase = dt.Clone()
		} else {
			c.httpBase = http.DefaultTransport
		}
	})
	return c.httpBase
}

// closeIdle closes the idle connections of the pooled transport.
func (c *conn) closeIdle() {
	if t, ok := c.httpBase.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// linkTransport adds the configured headers, ties every request to the
// link's life and bounds JSON replies to MaxReplyBytes (SSE events are
// bounded by the SDK's MaxEventSize).
type linkTransport struct {
	base    http.RoundTripper
	headers http.Header
	// closing is closed when the link closes; afterClose runs f then.
	closing    <-chan struct{}
	afterClose func(f func()) (stop func() bool)
}

// RoundTrip implements http.RoundTripper.
func (t *linkTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := func() bool { return false }
	select {
	case <-t.closing:
		// A request made while closing (the session's DELETE) goes out.
	default:
		// Closing the link aborts the requests in flight.
		stop = t.afterClose(cancel)
	}
	req = req.Clone(ctx)
	for k, vs := range t.headers {
		req.Header[k] = vs
	}
	// The caller's trace continues at the server (W3C traceparent), when
	// tracing is on.
	propagate.Inject(ctx, req.Header)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	limit := int64(-1)
	if mt != "text/event-stream" {
		limit = MaxReplyBytes
	}
	resp.Body = &boundedBody{rc: resp.Body, left: limit, done: func() { stop(); cancel() }}
	return resp, nil
}

// boundedBody is a reply body read at most up to left bytes (-1: no
// bound); a longer body fails with ErrReplyTooLarge.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	once sync.Once
	done func()
}

// Read implements io.Reader.
func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.left >= 0 {
		b.left -= int64(n)
		if b.left < 0 {
			return 0, ErrReplyTooLarge
		}
	}
	return n, err
}

// Close implements io.Closer.
func (b *boundedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.done)
	return err
}

// stripURL drops the *url.Error wrapper so the URL (which may carry a
// token) stays out of messages and logs.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
