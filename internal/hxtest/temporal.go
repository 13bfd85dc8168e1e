package hxtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TemporalNamespace is the namespace of a TemporalServer.
const TemporalNamespace = "default"

// TemporalServer is a real Temporal server (the pinned Temporal CLI's
// `server start-dev`, in-memory, headless) listening on a free loopback
// port. It stops with the test.
type TemporalServer struct {
	// Address is the frontend's host:port.
	Address string
	// Namespace is TemporalNamespace.
	Namespace string
	// CLI is the path of the Temporal CLI binary.
	CLI string
}

// TemporalOptions configures StartTemporal.
type TemporalOptions struct {
	// SearchAttributes are custom search attributes to register, name →
	// type (Keyword, KeywordList, Text, Int, Double, Bool, Datetime).
	SearchAttributes map[string]string
}

// TemporalCLI returns the path of the pinned Temporal CLI, building it once
// per machine with scripts/build-temporal.sh (about 4 minutes cold, cached
// under ~/.cache/hxd). HXD_TEMPORAL_CLI overrides the path.
func TemporalCLI() (string, error) {
	return PeerBinary("build-temporal.sh", "HXD_TEMPORAL_CLI")
}

// StartTemporal starts a Temporal dev server for the test and stops it at
// cleanup. When the CLI cannot be built or the server does not start, the
// test is skipped with the reason, except under CI=true, where it fails.
func StartTemporal(t testing.TB, opts TemporalOptions) *TemporalServer {
	t.Helper()
	cli, err := TemporalCLI()
	if err != nil {
		DependencyMissing(t, "hxtest: Temporal CLI unavailable: %v", err)
		return nil
	}
	var lastErr error
	for range 3 { // a free port may be taken between picking and binding
		srv, err := startTemporal(t, cli, opts)
		if err == nil {
			return srv
		}
		lastErr = err
	}
	DependencyMissing(t, "hxtest: Temporal dev server did not start: %v", lastErr)
	return nil
}

func startTemporal(t testing.TB, cli string, opts TemporalOptions) (*TemporalServer, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{
		"server", "start-dev", "--headless",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--db-filename", "", // in memory: nothing outlives the test
		"--log-level", "error",
	}
	names := make([]string, 0, len(opts.SearchAttributes))
	for name := range opts.SearchAttributes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		args = append(args, "--search-attribute", name+"="+opts.SearchAttributes[name])
	}
	peer, err := StartPeer(exec.Command(cli, args...), t.TempDir(), "temporal")
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := waitTemporal(ctx, cli, addr, peer.Exited); err != nil {
		peer.Stop()
		return nil, fmt.Errorf("temporal server on %s: %w\n%s", addr, errors.Join(err, peer.Err()), peer.LogTail())
	}
	t.Cleanup(peer.Stop)
	t.Logf("hxtest: Temporal dev server on %s", addr)
	return &TemporalServer{Address: addr, Namespace: TemporalNamespace, CLI: cli}, nil
}

// waitTemporal waits until the frontend accepts connections and the
// default namespace answers.
func waitTemporal(ctx context.Context, cli, addr string, exited <-chan struct{}) error {
	for {
		select {
		case <-exited:
			return errors.New("exited early")
		case <-ctx.Done():
			return errors.New("not ready within 90s")
		case <-time.After(200 * time.Millisecond):
		}
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		_ = conn.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = exec.CommandContext(cctx, cli, "operator", "namespace", "describe",
			"--namespace", TemporalNamespace, "--address", addr).Run()
		cancel()
		if err == nil {
			return nil
		}
	}
}
