package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/sqlite"
)

// envDescriptorsChild makes the test binary run descriptorsChild on the
// folder it names instead of the tests (TestMain).
const envDescriptorsChild = "HXD_TEST_SQLITE_DESCRIPTORS_CHILD"

func init() {
	childMains[envDescriptorsChild] = func(dir string) { os.Exit(descriptorsChild(dir)) }
}

// TestNoDescriptorsIsUnavailable: with every file descriptor of the
// process in use (EMFILE), a read that needs a new connection
// (SQLITE_CANTOPEN) and Ping are ErrUnavailable; once descriptors are free
// again both work. It runs in a child process, since the limit is the
// process's.
func TestNoDescriptorsIsUnavailable(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envDescriptorsChild+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child:\n%s", out)
	require.Contains(t, string(out), "descriptors child: ok")
	t.Logf("%s", out)
}

// descriptorsChild is TestNoDescriptorsIsUnavailable's child; it returns
// the exit code (1 also when closing the store fails).
func descriptorsChild(dir string) (code int) {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "descriptors child: "+format+"\n", args...)
		return 1
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("getrlimit: %v", err)
	}
	lim.Cur = min(lim.Max, 256)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fail("setrlimit: %v", err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "hxd.db"), AutoMigrate: true})
	if err != nil {
		return fail("open: %v", err)
	}
	defer func() {
		if err := st.Close(); err != nil && code == 0 {
			code = fail("close: %v", err)
		}
	}()
	sess := &rtstore.SessionRow{ID: "ses-1", Principal: "alice"}
	if err := st.SessionInsert(ctx, sess); err != nil {
		return fail("insert session: %v", err)
	}
	_, _, err = st.RunInsert(ctx, &rtstore.RunInsertParams{
		Run:    rtstore.RunRow{ID: "run-1", SessionID: sess.ID, RequestID: "req-1", MessageDigest: "d", Phase: "start", State: json.RawMessage(`{}`)},
		Commit: &rtstore.Commit{SessionID: sess.ID, RunID: "run-1", Status: rtstore.StatusRunning, Phase: "start", State: json.RawMessage(`{}`)},
	})
	if err != nil {
		return fail("insert run: %v", err)
	}
	// read holds the read pool's connection with a snapshot and reads the
	// session meanwhile, on a connection the pool must open.
	read := func() error {
		var inner error
		err := st.RunSnapshot(ctx, "run-1", func(*rtstore.RunRow, func(func(journal.Record) error) error) error {
			_, inner = st.SessionGet(ctx, sess.ID)
			return nil
		})
		return errors.Join(err, inner)
	}
	// The read pool holds one connection now (Open's), so read needs a
	// new one.
	if err := st.Ping(ctx); err != nil {
		return fail("ping before: %v", err)
	}

	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				return fail("use up descriptors: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	readErr, pingErr := read(), st.Ping(ctx)
	for _, f := range held {
		_ = f.Close()
	}
	if !errors.Is(readErr, rtstore.ErrUnavailable) {
		return fail("read without descriptors: want ErrUnavailable, got %v", readErr)
	}
	if !errors.Is(pingErr, rtstore.ErrUnavailable) {
		return fail("ping without descriptors: want ErrUnavailable, got %v", pingErr)
	}
	if err := read(); err != nil {
		return fail("read after: %v", err)
	}
	if err := st.Ping(ctx); err != nil {
		return fail("ping after: %v", err)
	}
	fmt.Printf("descriptors child: ok (%d descriptors held; read: %v; ping: %v)\n", len(held), readErr, pingErr)
	return 0
}
