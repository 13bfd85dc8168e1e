package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of a child's stderr in hxd's log.
const (
	stderrLineBytes   = 1024
	stderrWindow      = 10 * time.Second
	stderrWindowLines = 100
)

// child is a running stdio server process.
type child struct {
	cmd   *exec.Cmd
	grace time.Duration
	log   *slog.Logger
	// nowFunc is the clock of the stderr rate bound.
	nowFunc func() time.Time

	stdin      *os.File
	stdout     *os.File
	stderr     *os.File
	exited     chan struct{}
	stderrDone chan struct{}

	mu  sync.Mutex
	cut error
}

// childEnv returns the environment of a stdio child: only PATH, HOME,
// env and env_from. A variable env_from names must be set.
func (c *conn) childEnv() ([]string, error) {
	lookup := c.m.opts.LookupEnvFunc
	vars := map[string]string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := lookup(k); ok {
			vars[k] = v
		}
	}
	for k, v := range c.cfg.Env {
		vars[k] = v
	}
	for _, k := range sortedKeys(c.cfg.EnvFrom) {
		name := c.cfg.EnvFrom[k]
		v, ok := lookup(name)
		if !ok {
			return nil, &UnavailableError{Server: c.cfg.Name, Reason: fmt.Sprintf("environment variable %s (env_from.%s) is not set", name, k)}
		}
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for _, k := range sortedKeys(vars) {
		env = append(env, k+"="+vars[k])
	}
	return env, nil
}

// dialStdio starts the child and initializes a session over its stdio.
func (c *conn) dialStdio(ctx context.Context) (*link, error) {
	env, err := c.childEnv()
	if err != nil {
		return nil, err
	}
	ch, err := c.startChild(env)
	if err != nil {
		return nil, c.unavailable("cannot start the server", err)
	}
	transport := &sdk.IOTransport{
		Reader: &limitedReader{f: ch.stdout, ch: ch},
		Writer: ch.stdin,
		// Our reader cuts a line over MaxReplyBytes with a clear cause; this
		// bounds a frame spread over several lines.
		MaxLineLength: MaxReplyBytes + 1,
	}
	session, err := c.client().Connect(ctx, transport, nil)
	if err != nil {
		ch.kill()
		ch.shut()
		ch.wait()
		reason := "initialize failed"
		if cut := ch.cutErr(); cut != nil {
			err = cut
		}
		return nil, c.unavailable(reason, err)
	}
	c.m.opts.Logger.Debug("mcp server started", "mcp_server", c.cfg.Name, "agent", c.agent, "pid", ch.cmd.Process.Pid)
	return &link{session: session, transport: TransportStdio, child: ch, cancel: func() {}}, nil
}

// startChild starts the command with env and its three pipes.
func (c *conn) startChild(env []string) (*child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...) //nolint:gosec // the agent file names the server to run
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = startCmd(cmd)       // Pdeathsig on Linux (start_linux.go)
	closeAll(inR, outW, errW) // the child holds its ends now
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, err
	}
	ch := &child{
		cmd: cmd, grace: c.m.opts.TerminateGrace, nowFunc: time.Now,
		log:   c.m.opts.Logger.With("mcp_server", c.cfg.Name, "agent", c.agent, "pid", cmd.Process.Pid),
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go func() {
		err := cmd.Wait()
		ch.log.Debug("mcp server exited", "status", exitStatus(err))
		close(ch.exited)
	}()
	go ch.logStderr()
	return ch, nil
}

// exitStatus describes how a child ended, for the log.
func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	if err != nil {
		return "wait failed"
	}
	return "exit status 0"
}

// closeAll closes files whose close has nothing to report.
func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// logStderr copies the child's stderr to the log at debug level, one
// record per line: lines are cut at stderrLineBytes and at most
// stderrWindowLines lines are logged per stderrWindow (the rest are
// counted and dropped). The pipe is always drained.
func (ch *child) logStderr() {
	defer close(ch.stderrDone)
	r := bufio.NewReaderSize(ch.stderr, stderrLineBytes)
	windowStart, lines, dropped := ch.nowFunc(), 0, 0
	defer func() {
		if dropped > 0 {
			ch.log.Debug("mcp server stderr lines dropped", "lines", dropped)
		}
	}()
	for {
		line, err := r.ReadSlice('\n')
		full := len(line) > 0
		if errors.Is(err, bufio.ErrBufferFull) {
			// Skip the rest of an overlong line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
		}
		if full {
			if now := ch.nowFunc(); now.Sub(windowStart) > stderrWindow {
				if dropped > 0 {
					ch.log.Debug("mcp server stderr lines dropped", "lines", dropped)
				}
				windowStart, lines, dropped = now, 0, 0
			}
			if lines < stderrWindowLines {
				lines++
				ch.log.Debug("mcp server stderr", "line", string(bytes.TrimRight(line, "\r\n")))
			} else {
				dropped++
			}
		}
		if err != nil {
			return
		}
	}
}

// exitedOrCut reports a child that exited or whose output was cut off.
func (ch *child) exitedOrCut() bool {
	select {
	case <-ch.exited:
		return true
	default:
	}
	return ch.cutErr() != nil
}

// cutErr returns why hxd cut the child off, or nil.
func (ch *child) cutErr() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.cut
}

// cutOff records why the child is cut off and kills it.
func (ch *child) cutOff(err error) {
	ch.mu.Lock()
	if ch.cut == nil {
		ch.cut = err
	}
	ch.mu.Unlock()
	ch.log.Warn("mcp server cut off", "error", err)
	ch.kill()
}

// kill sends SIGKILL (a child that already exited ignores it).
func (ch *child) kill() {
	_ = ch.cmd.Process.Kill() // fails only when it has exited already
}

// shut closes hxd's ends of stdin and stdout: the child sees EOF, and a
// pending read fails at once.
func (ch *child) shut() {
	closeAll(ch.stdin, ch.stdout)
}

// wait waits for the child to exit, killing it after the grace period,
// then for its stderr to be drained.
func (ch *child) wait() {
	if ch.cutErr() != nil {
		ch.kill()
	}
	timer := time.NewTimer(ch.grace)
	select {
	case <-ch.exited:
		timer.Stop()
	case <-timer.C:
		ch.log.Warn("mcp server did not exit after stdin closed; killing it")
		ch.kill()
		<-ch.exited
	}
	// A grandchild may still hold stderr open: stop reading after a
	// short while rather than forever.
	drain := time.NewTimer(100 * time.Millisecond)
	select {
	case <-ch.stderrDone:
	case <-drain.C:
	}
	drain.Stop()
	_ = ch.stderr.Close()
	<-ch.stderrDone
}

// limitedReader is the child's stdout as the SDK reads it: a line over
// MaxReplyBytes cuts the child off with ErrReplyTooLarge.
type limitedReader struct {
	f    *os.File
	ch   *child
	line int
}

// Read implements io.Reader.
func (r *limitedReader) Read(p []byte) (int, error) {
	if err := r.ch.cutErr(); err != nil {
		return 0, err
	}
	n, err := r.f.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		r.line = n - i - 1
	} else {
		r.line += n
	}
	if r.line > MaxReplyBytes {
		r.ch.cutOff(ErrReplyTooLarge)
		return 0, ErrReplyTooLarge
	}
	return n, err
}

// Close implements io.Closer.
func (r *limitedReader) Close() error { return r.f.Close() }

var _ io.ReadCloser = (*limitedReader)(nil)
