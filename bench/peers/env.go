package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// env holds what the systems share: the PostgreSQL server (through an
// admin connection to HXD_TEST_DATABASE_URL's database), the databases
// created for this run, the processes started and temporary folders.
type env struct {
	cfg       *config
	log       *slog.Logger
	admin     *pgx.Conn
	pgVersion string
	hxdBin    string
	run       string // suffix of this run's names (cfg.runID)
	dbs       []string
	procs     []*proc
	dirs      []string
	closers   []func()
}

func newEnv(ctx context.Context, cfg *config, log *slog.Logger) (*env, error) {
	admin, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL (HXD_TEST_DATABASE_URL): %w", err)
	}
	e := &env{cfg: cfg, log: log, admin: admin, run: cfg.runID}
	if err := admin.QueryRow(ctx, `SHOW server_version`).Scan(&e.pgVersion); err != nil {
		_ = admin.Close(ctx)
		return nil, err
	}
	return e, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// close stops the processes, drops the databases and removes folders.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, db := range e.dbs {
		if _, err := e.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{db}.Sanitize()+` WITH (FORCE)`); err != nil {
			e.log.Warn("drop database", "db", db, "error", err)
		}
	}
	_ = e.admin.Close(ctx)
	for _, d := range e.dirs {
		_ = os.RemoveAll(d)
	}
}

// createDB creates a database of this run and returns its name and URL.
func (e *env) createDB(ctx context.Context, name string) (string, string, error) {
	db := "hxd_peers_" + strings.NewReplacer("-", "_", "@", "_").Replace(name) + "_" + e.run
	if _, err := e.admin.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", db, err)
	}
	e.dbs = append(e.dbs, db)
	u, err := url.Parse(e.cfg.DatabaseURL)
	if err != nil {
		return "", "", fmt.Errorf("database URL: %w", err)
	}
	u.Path = "/" + db
	return db, u.String(), nil
}

// xactCommit is the number of committed transactions of database db
// PostgreSQL has been told of (pg_stat_database; backends report with a
// delay of up to 10 s when idle, 1 s when busy).
func (e *env) xactCommit(ctx context.Context, db string) (int64, error) {
	if _, err := e.admin.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		return 0, err
	}
	var n int64
	err := e.admin.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, db).Scan(&n)
	return n, err
}

func (e *env) tempDir() (string, error) {
	d, err := tempDir()
	if err == nil {
		e.dirs = append(e.dirs, d)
	}
	return d, err
}

// buildHxd builds bin/hxd in the repository with `go build`.
func (e *env) buildHxd(ctx context.Context) error {
	e.hxdBin = filepath.Join(e.cfg.Repo, "bin", "hxd")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", e.hxdBin, "./cmd/hxd")
	cmd.Dir = e.cfg.Repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/hxd: %w", err)
	}
	e.log.Info("built", "bin", e.hxdBin, "in", time.Since(start).Round(time.Millisecond))
	return nil
}

// peerBinary runs scripts/<script> of the repository, which prints the
// pinned peer's path, building it once per machine (minutes cold).
func (e *env) peerBinary(ctx context.Context, script, override string) (string, error) {
	if v := os.Getenv(override); v != "" {
		return v, nil
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(e.cfg.Repo, "scripts", script))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/%s: %w", script, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a child process; its output goes to a log file whose tail is
// shown when it fails.
type proc struct {
	name   string
	cmd    *exec.Cmd
	logf   string
	exited chan struct{}
	err    error
}

func (e *env) start(name string, argv []string, extraEnv ...string) (*proc, error) {
	dir, err := e.tempDir()
	if err != nil {
		return nil, err
	}
	logf := filepath.Join(dir, name+".log")
	f, err := os.Create(logf)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logf: logf, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.exited)
	}()
	e.procs = append(e.procs, p)
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after 10 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

// tail is the end of the process's log.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logf)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// waitReady polls ready until it returns nil, the process exits or 60 s pass.
func (p *proc) waitReady(ctx context.Context, ready func(context.Context) error) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 60s: %w\n%s", p.name, err, p.tail())
		}
	}
}

// machine describes where the numbers were measured.
type machine struct {
	OS, Arch, CPU, Go, Hxd, PostgreSQL string
	CPUs                               int
	// Load is /proc/loadavg's 1, 5 and 15 minute averages at the start.
	Load string
}

func describeMachine(ctx context.Context, cfg *config) machine {
	m := machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", cfg.Repo, "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		m.Hxd = strings.TrimSpace(string(out))
	}
	return m
}

var errNotReady = errors.New("not ready")
