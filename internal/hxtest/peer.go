package hxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// peerBuilds caches PeerBinary's answer per script for the test binary.
var peerBuilds sync.Map // script → func() (string, error)

// PeerBinary returns the path of a real test peer (a Temporal dev server,
// versitygw …) that the pinned build script scripts/<script> prints after
// building it once per machine into ~/.cache/hxd. The script runs once per
// test binary; when the environment variable env is set, its value (a
// prebuilt binary) is used instead.
func PeerBinary(script, env string) (string, error) {
	f, _ := peerBuilds.LoadOrStore(script, sync.OnceValues(func() (string, error) {
		if p := os.Getenv(env); p != "" {
			return p, nil
		}
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", script))
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("scripts/%s: %w\n%s", script, err, Tail(stderr.String(), 4000))
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return strings.TrimSpace(lines[len(lines)-1]), nil
	}))
	return f.(func() (string, error))()
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// RepoRoot is the folder of the module's go.mod, found upwards from the
// working directory (a test runs in its package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Tail returns the last n bytes of s, marked as cut when longer.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Peer is a running test peer process started by StartPeer.
type Peer struct {
	// Exited is closed once the process has ended (Err then says how).
	Exited <-chan struct{}
	err    error
	stop   func()
	log    string
}

// StartPeer starts cmd (not yet started) with its output in a log file
// under dir, in its own process group (PeerProcAttr). Stop it with Stop.
func StartPeer(cmd *exec.Cmd, dir, name string) (*Peer, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = PeerProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	p := &Peer{Exited: exited, log: logPath}
	go func() {
		p.err = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			_ = logFile.Close()
		})
	}
	p.stop = stop
	return p, nil
}

// Err is how the process ended; it waits for Exited.
func (p *Peer) Err() error {
	<-p.Exited
	return p.err
}

// Stop ends the peer's process group (SIGTERM, then SIGKILL after 10 s)
// and waits for it; calling it again does nothing.
func (p *Peer) Stop() { p.stop() }

// LogTail is the end of the peer's log, for an error message.
func (p *Peer) LogTail() string {
	b, _ := os.ReadFile(p.log)
	return Tail(string(b), 4000)
}
