package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSmoke runs one short cell of raw commits, DBOS and hxd recorded on
// PostgreSQL and SQLite at c = 1 and 2 through the whole harness (bin/hxd
// built, child processes, databases created and dropped, commits
// counted), then writes the report and checks what it says. It skips when
// the test PostgreSQL is unreachable, except under CI=true.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds bin/hxd and starts processes")
	}
	dbURL := defaultDatabaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if conn, err := pgx.Connect(ctx, dbURL); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL %s: %v", dbURL, err)
		}
		t.Skipf("PostgreSQL unreachable (HXD_TEST_DATABASE_URL): %v", err)
	} else {
		_ = conn.Close(ctx)
	}
	out := t.TempDir()
	cfg, err := parseFlags([]string{"-repo", "../..", "-duration", "300ms", "-c", "1,2", "-temporal=false",
		"-systems", strings.Join([]string{sysRaw, sysDBOS, sysHxdPGRec, sysHxdLiteRec}, ","), "-out", out})
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	res, err := Run(ctx, cfg, log, &table)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(table.String())
	for _, sys := range []string{sysRaw, sysDBOS, sysHxdPGRec, sysHxdLiteRec} {
		for _, c := range []int{1, 2} {
			x := res.Cell(sys, c)
			if x == nil || x.Ops == 0 || x.EffectsPerSec() <= 0 || x.Percentile(50) <= 0 {
				t.Fatalf("%s at c=%d: no measurement: %+v", sys, c, x)
			}
			if sys == sysHxdLiteRec {
				if x.Commits != -1 {
					t.Errorf("%s: commits counted on SQLite: %d", sys, x.Commits)
				}
				continue
			}
			// Every op commits at least once per effect (hxd: at most 2
			// boundary commits per effect plus reads and background work).
			if x.Commits < int64(x.Effects) {
				t.Errorf("%s at c=%d: %d commits for %d effects", sys, c, x.Commits, x.Effects)
			}
		}
	}
	// The databases of the run are gone.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'hxd_peers_%\_'||$1`, cfg.runID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d databases of the run left behind", left)
	}
	if err := writeReport(cfg, res); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "peers.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1 | raw-commit |", "| 2 | dbos |", "**hxd-pg-recorded**", "hxd-sqlite-recorded", "PostgreSQL " + res.Machine.PostgreSQL, "go run . "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("peers.md lacks %q:\n%s", want, md)
		}
	}
	png, err := os.ReadFile(filepath.Join(out, "peers.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("peers.png is not a PNG (%d bytes)", len(png))
	}
}

// TestCellStats: effects/s, percentiles and commits per effect.
func TestCellStats(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		c        cell
		eps      float64
		p50, p99 time.Duration
		cpe      float64
	}{
		{"empty", cell{Commits: -1}, 0, 0, 0, -1},
		{"one", cell{Effects: 21, Elapsed: time.Second, Latencies: []time.Duration{5 * ms}, Commits: 42}, 21, 5 * ms, 5 * ms, 2},
		{"hundred", cell{Effects: 100, Elapsed: 2 * time.Second, Latencies: seq(100, ms), Commits: -1}, 50, 50 * ms, 99 * ms, -1},
		{"unsorted", cell{Effects: 3, Elapsed: time.Second, Latencies: []time.Duration{3 * ms, 1 * ms, 2 * ms}, Commits: 3}, 3, 2 * ms, 3 * ms, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.EffectsPerSec(); got != tt.eps {
				t.Errorf("effects/s %v, want %v", got, tt.eps)
			}
			if got := tt.c.Percentile(50); got != tt.p50 {
				t.Errorf("p50 %v, want %v", got, tt.p50)
			}
			if got := tt.c.Percentile(99); got != tt.p99 {
				t.Errorf("p99 %v, want %v", got, tt.p99)
			}
			if got := tt.c.CommitsPerEffect(); got != tt.cpe {
				t.Errorf("commits/effect %v, want %v", got, tt.cpe)
			}
		})
	}
}

// seq is n latencies 1×unit … n×unit, shuffled by reversal.
func seq(n int, unit time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(n-i) * unit
	}
	return out
}
