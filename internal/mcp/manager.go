package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxReplyBytes bounds one message from a server (a stdio line, an SSE
// event or a JSON reply). A larger one cuts the connection off.
const MaxReplyBytes = 8 << 20

// ErrUnavailable is wrapped by the error of a server that cannot be
// reached (connect, initialize or list failed). Its message names the
// server and never a header value, an env value or the URL.
var ErrUnavailable = errors.New("mcp server unavailable")

// ErrClosed is returned once the Manager is closed.
var ErrClosed = errors.New("mcp manager closed")

// ErrReplyTooLarge is the cause of a connection cut off because the server
// sent a message over MaxReplyBytes (a huge reply or a flood of output).
var ErrReplyTooLarge = fmt.Errorf("mcp server message exceeds %d bytes", MaxReplyBytes)

// UnavailableError reports a server that cannot be reached. It wraps
// ErrUnavailable and the cause (whose text is scrubbed of secrets).
type UnavailableError struct {
	// Server is the server's name in the agent file.
	Server string
	// Reason is a short description without secrets.
	Reason string
	cause  error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("MCP server %q is unavailable: %s", e.Server, e.Reason)
}

// Unwrap returns ErrUnavailable and the cause.
func (e *UnavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.cause}
}

// Options are the process-level dependencies of a Manager.
type Options struct {
	// Logger receives connection events and servers' stderr (debug level).
	// Optional, default: slog.Default().
	Logger *slog.Logger
	// LookupEnvFunc reads hxd's environment for env_from and headers_env.
	// Optional, default: os.LookupEnv.
	LookupEnvFunc func(string) (string, bool)
	// HTTPTransport is the base round tripper of the HTTP clients (one
	// client per server). Optional, default: a clone of
	// http.DefaultTransport per server.
	HTTPTransport http.RoundTripper
	// TerminateGrace is how long Close waits for a stdio child to exit
	// after its stdin is closed before killing it. Optional, default: 5s.
	TerminateGrace time.Duration
}

// Manager holds the connections to MCP servers: one per (agent, server),
// shared by that agent's sessions, opened lazily and reopened when they
// break (a stdio child that died is restarted). It is safe for concurrent
// use.
type Manager struct {
	opts Options

	mu     sync.Mutex
	conns  map[connKey]*conn
	closed bool
}

// connKey identifies a connection.
type connKey struct{ agent, server string }

// NewManager returns a Manager without connections.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LookupEnvFunc == nil {
		opts.LookupEnvFunc = os.LookupEnv
	}
	if opts.TerminateGrace <= 0 {
		opts.TerminateGrace = 5 * time.Second
	}
	return &Manager{opts: opts, conns: map[connKey]*conn{}}
}

// conn returns the connection of (agent, cfg.Name), created if needed. A
// changed declaration (another agent version reusing the key) replaces
// the old connection, which is closed.
func (m *Manager) conn(agent string, cfg ServerConfig) (*conn, error) {
	cfg = cfg.WithDefaults()
	key := connKey{agent, cfg.Name}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	c := m.conns[key]
	var old *conn
	if c != nil && !reflect.DeepEqual(c.cfg, cfg) {
		old, c = c, nil
	}
	if c == nil {
		c = &conn{m: m, agent: agent, cfg: cfg, connecting: make(chan struct{}, 1)}
		m.conns[key] = c
	}
	m.mu.Unlock()
	if old != nil {
		old.close()
	}
	return c, nil
}

// Close closes every connection and waits for every stdio child to exit
// (killing those that outlive TerminateGrace). Calls in flight fail.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	conns := make([]*conn, 0, len(m.conns))
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.conns = map[connKey]*conn{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.close)
	}
	wg.Wait()
	return nil
}

// conn is the connection of one agent to one server. Its link is replaced
// when it breaks.
type conn struct {
	m     *Manager
	agent string
	cfg   ServerConfig

	// connecting serializes connection attempts; a buffered channel so a
	// waiting caller can give up with its context.
	connecting chan struct{}

	// httpBase is the pooled transport of an HTTP server.
	httpOnce sync.Once
	httpBase http.RoundTripper

	mu     sync.Mutex
	cur    *link
	closed bool
}

// lock takes the connect lock, or fails with ctx.
func (c *conn) lock(ctx context.Context) error {
	select {
	case c.connecting <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unlock releases the connect lock.
func (c *conn) unlock() { <-c.connecting }

// get returns a live link, connecting (or reconnecting) first if needed.
func (c *conn) get(ctx context.Context) (*link, error) {
	if l := c.live(); l != nil {
		return l, nil
	}
	if err := c.lock(ctx); err != nil {
		return nil, c.unavailable("connection attempt cancelled", err)
	}
	defer c.unlock()
	if l := c.live(); l != nil {
		return l, nil
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	l, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		l.close()
		return nil, ErrClosed
	}
	old := c.cur
	c.cur = l
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	return l, nil
}

// live returns the current link if it is not broken.
func (c *conn) live() *link {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && !c.cur.broken() {
		return c.cur
	}
	return nil
}

// drop closes l if it is still the current link (after a broken call).
func (c *conn) drop(l *link) {
	c.mu.Lock()
	if c.cur == l {
		c.cur = nil
	}
	c.mu.Unlock()
	l.close()
}

// close closes the connection for good, after any connection attempt in
// progress (which sees the connection closed and closes its link).
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	l := c.cur
	c.cur = nil
	c.mu.Unlock()
	if l != nil {
		l.close()
	}
	c.connecting <- struct{}{}
	<-c.connecting
	c.closeIdle()
}

// dial opens a new link: a stdio child, or streamable HTTP then SSE.
func (c *conn) dial(ctx context.Context) (*link, error) {
	if len(c.cfg.Command) > 0 {
		return c.dialStdio(ctx)
	}
	return c.dialHTTP(ctx)
}

// client returns the SDK client hxd connects with.
func (c *conn) client() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "hxd", Version: "1"}, &sdk.ClientOptions{
		Logger:       c.m.opts.Logger.With("mcp_server", c.cfg.Name),
		Capabilities: &sdk.ClientCapabilities{},
	})
}

// secrets returns the values that must never appear in a message: every
// header and env_from value, and every literal env value.
func (c *conn) secrets() []string {
	var out []string
	for _, name := range c.cfg.HeadersEnv {
		if v, ok := c.m.opts.LookupEnvFunc(name); ok && v != "" {
			out = append(out, v)
		}
	}
	for _, name := range c.cfg.EnvFrom {
		if v, ok := c.m.opts.LookupEnvFunc(name); ok && v != "" {
			out = append(out, v)
		}
	}
	for _, v := range c.cfg.Env {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// scrub removes secrets and URLs from an error's text.
func (c *conn) scrub(err error) string {
	if err == nil {
		return ""
	}
	msg := stripURL(err).Error()
	if c.cfg.URL != "" {
		msg = strings.ReplaceAll(msg, c.cfg.URL, "<url>")
	}
	for _, s := range c.secrets() {
		msg = strings.ReplaceAll(msg, s, "<redacted>")
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return msg
}

// unavailable returns an *UnavailableError for this server.
func (c *conn) unavailable(what string, cause error) error {
	reason := what
	if cause != nil {
		reason += ": " + c.scrub(cause)
	}
	ue := &UnavailableError{Server: c.cfg.Name, Reason: reason}
	if cause != nil {
		ue.cause = errors.New(c.scrub(cause))
	}
	return ue
}

// link is one live session with a server.
type link struct {
	session   *sdk.ClientSession
	transport string
	// child is the stdio child, nil for HTTP.
	child *child
	// cancel ends the link's context (the SSE stream).
	cancel context.CancelFunc

	mu       sync.Mutex
	isBroken bool
	closeOne sync.Once
}

// broken reports a link whose session or child is gone.
func (l *link) broken() bool {
	l.mu.Lock()
	b := l.isBroken
	l.mu.Unlock()
	if b {
		return true
	}
	return l.child != nil && l.child.exitedOrCut()
}

// markBroken records that a call saw the link break.
func (l *link) markBroken() {
	l.mu.Lock()
	l.isBroken = true
	l.mu.Unlock()
}

// cutReason returns why the link was cut off by hxd, or nil.
func (l *link) cutReason() error {
	if l.child != nil {
		return l.child.cutErr()
	}
	return nil
}

// close ends the session and, for stdio, waits for the child to exit.
// The transport is shut first (HTTP requests aborted, the child's pipes
// closed) so that calls in flight fail at once instead of holding the
// session's graceful Close until their timeouts.
func (l *link) close() {
	l.closeOne.Do(func() {
		l.markBroken()
		l.cancel()
		if l.child != nil {
			l.child.shut()
		}
		_ = l.session.Close() // the link is gone either way
		if l.child != nil {
			l.child.wait()
		}
	})
}
