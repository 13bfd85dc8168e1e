package storekit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"hxd/internal/runtime/rtstore"
	"hxd/internal/store/storekit"
)

func TestFormatCursor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		seq  int64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{42, "42"},
		{1 << 53, "9007199254740992"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, storekit.FormatCursor(tt.seq))
		})
	}
}

func TestIsOurs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"not found", rtstore.ErrNotFound, true},
		{"wrapped conflict", fmt.Errorf("commit: %w", rtstore.ErrRecordConflict), true},
		{"lease lost", rtstore.ErrLeaseLost, true},
		{"unavailable", fmt.Errorf("x: %w: disk full", rtstore.ErrUnavailable), true},
		{"schema", rtstore.ErrSchema, true},
		{"already exists", rtstore.ErrAlreadyExists, true},
		{"session busy", rtstore.ErrSessionBusy, true},
		{"request conflict", rtstore.ErrRequestConflict, true},
		{"foreign record", rtstore.ErrForeignRecord, true},
		{"canceled", fmt.Errorf("op: %w", context.Canceled), true},
		{"deadline", context.DeadlineExceeded, true},
		{"driver text", errors.New("database is locked"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, storekit.IsOurs(tt.err))
		})
	}
}

// lease is an rtstore.Lease with a fixed token.
type lease struct{ token string }

func (l lease) SessionID() string             { return "ses" }
func (l lease) Token() string                 { return l.token }
func (l lease) Generation() int64             { return 0 }
func (l lease) Renew(context.Context) error   { return nil }
func (l lease) Release(context.Context) error { return nil }

// seqs is a store's knowledge of a run, as the stores keep it.
type seqs struct {
	journal, event int64
	latest         bool
}

var unknown = seqs{journal: -1, event: -1}

// TestSeqCache: a run's entry is known only to the lease that put it; a
// commit without a lease drops it; a run started under a lease updates
// the lease's other runs, not another lease's.
func TestSeqCache(t *testing.T) {
	t.Parallel()
	a, b := lease{"a"}, lease{"b"}
	commit := func(run string, l rtstore.Lease) *rtstore.Commit {
		return &rtstore.Commit{SessionID: "ses", RunID: run, Lease: l}
	}
	type step struct {
		do   func(c *storekit.SeqCache[seqs])
		run  string
		l    rtstore.Lease
		want seqs
	}
	put := func(run string, l rtstore.Lease, v seqs) func(c *storekit.SeqCache[seqs]) {
		return func(c *storekit.SeqCache[seqs]) { c.Put(commit(run, l), v) }
	}
	started := func(run string, l rtstore.Lease, v seqs) func(c *storekit.SeqCache[seqs]) {
		return func(c *storekit.SeqCache[seqs]) {
			c.RunStarted(commit(run, l), v, func(e *seqs) { e.latest = false })
		}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"empty cache", []step{{nil, "r1", a, unknown}}},
		{"no lease", []step{{put("r1", a, seqs{3, 4, true}), "r1", nil, unknown}}},
		{"same lease", []step{{put("r1", a, seqs{3, 4, true}), "r1", a, seqs{3, 4, true}}}},
		{"other lease", []step{{put("r1", a, seqs{3, 4, true}), "r1", b, unknown}}},
		{"other run", []step{{put("r1", a, seqs{3, 4, true}), "r2", a, unknown}}},
		{"unfenced commit drops", []step{
			{put("r1", a, seqs{3, 4, true}), "r1", a, seqs{3, 4, true}},
			{put("r1", nil, seqs{9, 9, true}), "r1", a, unknown},
		}},
		{"run started", []step{
			{put("r1", a, seqs{3, 4, true}), "r1", a, seqs{3, 4, true}},
			{started("r2", a, seqs{0, 0, true}), "r2", a, seqs{0, 0, true}},
			{nil, "r1", a, seqs{3, 4, false}},
		}},
		{"run started under another lease", []step{
			{put("r1", a, seqs{3, 4, true}), "r1", a, seqs{3, 4, true}},
			{started("r2", b, seqs{0, 0, true}), "r1", a, seqs{3, 4, true}},
		}},
		{"run started without a lease", []step{
			{put("r2", a, seqs{1, 1, true}), "r2", a, seqs{1, 1, true}},
			{started("r2", nil, seqs{0, 0, true}), "r2", a, unknown},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c storekit.SeqCache[seqs]
			for i, st := range tt.steps {
				if st.do != nil {
					st.do(&c)
				}
				require.Equal(t, st.want, c.Known(commit(st.run, st.l), unknown), "step %d", i)
			}
		})
	}
}

func TestMigrateLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := storekit.MigrateLogger{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Printf("Start buffering %d/u %s\n", 1, "init")
	require.False(t, l.Verbose())
	require.Contains(t, buf.String(), `level=DEBUG msg="Start buffering 1/u init"`)
}
