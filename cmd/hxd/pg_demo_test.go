package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// stealDemoLease makes another owner take the demo session of schema over
// (a new owner token and generation, a long lease), as a process that
// claimed it after this one's lease lapsed would.
func stealDemoLease(t *testing.T, dbURL, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Error(err)
		return
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Error(err)
		return
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	ct, err := conn.Exec(ctx, `UPDATE sessions SET owner = 'thief', generation = generation + 1,
lease_until = clock_timestamp() + interval '1 hour'`)
	if err == nil && ct.RowsAffected() != 1 {
		err = errors.New("no demo session to take over")
	}
	if err != nil {
		t.Error(err)
	}
}

// TestPostgresDemoStopsWhenLeaseLost (issue 6): `hxd demo crash-recovery
// crash --database-url …` whose session is taken over mid-run stops with
// exit code 3 and says why, instead of waiting forever for a run it no
// longer drives. "commit": the next commit reports the lost lease;
// "renewal": the driver is busy (no commit) and the heartbeat's renewal
// finds the lease gone.
func TestPostgresDemoStopsWhenLeaseLost(t *testing.T) {
	t.Parallel()
	type hook func(ws string, kinds []journal.Kind)
	var (
		mu    sync.Mutex
		hooks = map[string]func(){}
	)
	h := hook(func(ws string, _ []journal.Kind) {
		mu.Lock()
		f := hooks[ws]
		delete(hooks, ws) // the first commit only
		mu.Unlock()
		if f != nil {
			f()
		}
	})
	demoTestAfterCommit.Store((*func(string, []journal.Kind))(&h))
	t.Cleanup(func() { demoTestAfterCommit.Store(nil) })

	for _, tc := range []struct {
		name  string
		block time.Duration // how long the driver stays in the hook after the theft
	}{
		{"commit", 0},
		{"renewal", 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dbURL, schema := testDatabase(t)
			ws := filepath.Join(t.TempDir(), "ws")
			mu.Lock()
			hooks[ws] = func() {
				stealDemoLease(t, dbURL, schema)
				time.Sleep(tc.block)
			}
			mu.Unlock()
			var out bytes.Buffer
			e := env{getenv: func(k string) string {
				switch k {
				case "DATABASE_URL":
					return dbURL
				case "HXD_SCHEMA":
					return schema
				}
				return ""
			}, stdout: &out, stderr: io.Discard, exit: func(code int) { t.Errorf("the demo exited with %d", code) }}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			err := run(ctx, []string{"demo", "crash-recovery", "crash", "--workspace", ws, "--lease-duration", "3s"}, e)
			require.Error(t, err, out.String())
			require.NoError(t, ctx.Err(), "the demo waited for a run it no longer drives")
			var ee *exitError
			require.ErrorAs(t, err, &ee, err.Error())
			require.Equal(t, demoLeaseLostCode, ee.code, err.Error())
			require.True(t, strings.HasPrefix(err.Error(), "Session lease lost"), err.Error())
			require.Less(t, time.Since(start), 30*time.Second)
		})
	}
}
