package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"hxd/internal/hxtest"
	"hxd/internal/store/postgres"
	"hxd/migrations"
)

// TestPostgresConcurrentStartups (issue 6): several `hxd serve
// --auto-migrate` processes and `hxd migrate` processes start at once on one
// empty schema. Every one succeeds (the advisory lock serialises the
// provisioning), the schema ends at the newest version, clean, with the
// checksum of every migration file recorded, and the servers share it.
func TestPostgresConcurrentStartups(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	work := t.TempDir()
	const servers, migrators = 4, 2
	var procs []*hxdChild
	key := testSigningKey(t)
	for i := range servers {
		procs = append(procs, spawnHxdArgs(t, fmt.Sprintf("serve %d", i), []string{"serve", "--addr", "127.0.0.1:0",
			"--demo", "--workdir", work, "--shutdown-timeout", "500ms",
			"--database-url", dbURL, "--schema", schema, "--auto-migrate", "--pool-size", "2", "--bundle-signing-key", key}))
	}
	var migs []*hxdChild
	for i := range migrators {
		migs = append(migs, spawnHxdArgs(t, fmt.Sprintf("migrate %d", i), []string{"migrate", "--database-url", dbURL, "--schema", schema}))
	}
	for _, m := range migs {
		require.Equal(t, 0, m.waitExit(60*time.Second), "%s: %s", m.name, m.log())
	}
	for _, p := range procs {
		p.awaitListening()
	}

	// One schema: a session made on one process is seen by every other.
	sid := procs[0].createSession("invoice-analyst")
	for _, p := range procs[1:] {
		code, m := p.call(http.MethodGet, "/sessions/"+url.PathEscape(sid), nil)
		require.Equal(t, http.StatusOK, code, m)
	}

	sums, err := migrations.Checksums(migrations.Postgres, "postgres")
	require.NoError(t, err)
	var head uint
	for v := range sums {
		head = max(head, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(ctx)) }()
	var (
		version int64
		dirty   bool
		rows    int
	)
	require.NoError(t, conn.QueryRow(ctx, `SELECT version, dirty, (SELECT count(*) FROM schema_migrations) FROM schema_migrations`).
		Scan(&version, &dirty, &rows))
	require.Equal(t, int64(head), version)
	require.False(t, dirty)
	require.Equal(t, 1, rows)
	got := map[uint]string{}
	r, err := conn.Query(ctx, `SELECT version, sha256 FROM schema_checksums`)
	require.NoError(t, err)
	var v int64
	var sum string
	_, err = pgx.ForEachRow(r, []any{&v, &sum}, func() error { got[uint(v)] = sum; return nil })
	require.NoError(t, err)
	require.Equal(t, sums, got, "one checksum per migration file, as recorded by whichever process applied it")

	for _, p := range procs {
		p.stop()
	}
}

// pgSSEFrame is one server-sent event as the client saw it.
type pgSSEFrame struct {
	id, event string
	at        time.Time
}

// TestPostgresCrossProcessSSE (issue 6): a client streams a run's events
// (SSE) from process B while process A drives the run on the same schema.
// B's watchers poll storage only every hour (HXD_WATCH_POLL=1h), so the
// events can only reach the client because A's commits NOTIFY and B
// LISTENs: every frame arrives shortly after A committed it, and the stream
// ends with the run_result.
func TestPostgresCrossProcessSSE(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	const steps = 4
	const hookDelay = 400 * time.Millisecond
	hook := newHookServer(t, func(int) time.Duration { return hookDelay })
	agents := writeHookAgent(t, "hooked", hook.srv.URL, "safe", steps)
	work := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"serve", "--addr", "127.0.0.1:0", "--agents", agents,
			"--workdir", work, "--shutdown-timeout", "500ms", "--database-url", dbURL, "--schema", schema,
			"--bundle-signing-key", testSigningKey(t)}, extra...)
	}
	require.NoError(t, postgres.Migrate(context.Background(), postgres.Config{URL: dbURL, Schema: schema}))
	a := spawnHxdArgs(t, "process A", args())
	b := spawnHxdArgs(t, "process B", args(), "HXD_WATCH_POLL=1h")
	a.awaitListening()
	b.awaitListening()

	sid := a.createSession("hooked")
	code, m := a.call(http.MethodPost, "/sessions/"+url.PathEscape(sid)+"/runs", map[string]any{"message": "go"})
	require.Equal(t, http.StatusAccepted, code, m)
	rid := m["run_id"].(string)
	// Mid-run: the first webhook call is in flight on A.
	select {
	case <-hook.arrivals:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not call its webhook")
	}

	req, err := http.NewRequest(http.MethodGet, b.base+"/runs/"+url.PathEscape(rid)+"/events?after=0", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opened := time.Now()
	resp, err := (&http.Client{}).Do(req.WithContext(ctx))
	require.NoError(t, err)
	defer hxtest.Close(t, resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))

	var (
		mu     sync.Mutex
		frames []pgSSEFrame
	)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var cur pgSSEFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				cur.event = strings.TrimPrefix(line, "event: ")
			case line == "" && cur.id != "":
				cur.at = time.Now()
				mu.Lock()
				frames = append(frames, cur)
				mu.Unlock()
				cur = pgSSEFrame{}
			}
		}
		err := sc.Err()
		if err == nil || errors.Is(err, io.EOF) {
			err = nil
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err, "the stream ends once the run is over")
	case <-ctx.Done():
		t.Fatal("the stream on B did not follow the run A drove (no LISTEN/NOTIFY wake-up; polling is off)")
	}
	ended := time.Since(opened)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, frames)
	require.Equal(t, "run_result", frames[len(frames)-1].event, "%+v", frames)
	// Frames kept arriving while A worked: at least one per remaining step
	// came after the stream had opened and caught up.
	caughtUp := frames[0].at
	later := 0
	for _, f := range frames {
		if f.at.Sub(caughtUp) > hookDelay/2 {
			later++
		}
	}
	require.GreaterOrEqual(t, later, steps-1, "events arrived as A committed them: %+v", frames)
	for i := 1; i < len(frames); i++ {
		require.NotEqual(t, frames[i-1].id, frames[i].id)
	}
	t.Logf("%d frames over %s; %d after the catch-up; poll interval on B: 1h", len(frames), ended, later)

	// B's view of the run agrees with A's.
	run := b.getRun(rid)
	require.Equal(t, "completed", run["status"], run)
	a.stop()
	b.stop()
}

// TestPostgresPoolSizeDefault: without --pool-size (or HXD_POOL_SIZE) serve
// hands the store PoolSize 0 and the store applies its own default.
func TestPostgresPoolSizeDefault(t *testing.T) {
	t.Parallel()
	dbURL, schema := testDatabase(t)
	cfg, err := parseServeFlags([]string{"--database-url", dbURL, "--schema", schema, "--auto-migrate"},
		env{getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard})
	require.NoError(t, err)
	require.Zero(t, cfg.PG.PoolSize)
	require.Zero(t, cfg.PG.config(nil).PoolSize, "no default applied outside the store")
	st, err := openStore(context.Background(), cfg.PG, "", nil)
	require.NoError(t, err)
	defer hxtest.Close(t, st)
	require.Equal(t, postgres.DefaultPoolSize, st.pg.PoolSize())
}
