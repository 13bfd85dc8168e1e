package storekit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"hxd/internal/runtime/rtstore"
)

// FormatCursor renders an event seq as its public cursor.
func FormatCursor(seq int64) string { return strconv.FormatInt(seq, 10) }

// ours are the errors a store passes through with their chain.
var ours = []error{
	rtstore.ErrNotFound, rtstore.ErrAlreadyExists, rtstore.ErrSessionBusy,
	rtstore.ErrRequestConflict, rtstore.ErrRecordConflict, rtstore.ErrForeignRecord,
	rtstore.ErrLeaseLost, rtstore.ErrUnavailable, rtstore.ErrSchema, rtstore.ErrInvalidCommit,
	rtstore.ErrNotEligible,
	context.Canceled, context.DeadlineExceeded,
}

// IsOurs reports whether err is safe to pass through with its chain: one
// of the rtstore sentinels or a context error.
func IsOurs(err error) bool {
	for _, target := range ours {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// SeqCache remembers what a store learned of each run in one commit (V:
// its last journal and event seqs and whatever else the store may trust)
// for the next commit under the same lease (rtstore.LeaseCache says why
// that is safe). The zero value is ready for use; it is safe for
// concurrent use.
type SeqCache[V any] struct {
	rtstore.LeaseCache[V]
}

// Known returns what cm's lease put for cm's run, or unknown.
func (c *SeqCache[V]) Known(cm *rtstore.Commit, unknown V) V {
	if v, ok := c.Get(cm); ok {
		return v
	}
	return unknown
}

// RunStarted records v for cm's run, inserted under cm's lease, after
// other has updated the entries of the lease's other runs (the session's
// latest run is no longer theirs). Without a lease it drops the run's
// entry, as Put does.
func (c *SeqCache[V]) RunStarted(cm *rtstore.Commit, v V, other func(*V)) {
	if cm.Lease != nil && other != nil {
		c.Update(cm.Lease.Token(), func(runID string, e *V) {
			if runID != cm.RunID {
				other(e)
			}
		})
	}
	c.Put(cm, v)
}

// MigrateLogger routes golang-migrate's logs (migrate.Logger) to Logger
// at debug level.
type MigrateLogger struct{ Logger *slog.Logger }

// Printf implements migrate.Logger.
func (l MigrateLogger) Printf(format string, v ...any) {
	l.Logger.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// Verbose implements migrate.Logger.
func (l MigrateLogger) Verbose() bool { return false }
