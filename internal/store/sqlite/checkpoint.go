package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync/atomic"
	"time"
)

// Checkpoints run in the background. The writer connection has automatic
// checkpoints off (wal_autocheckpoint=0): with them on, the commit that
// crosses 1000 WAL pages copies the WAL into the database file and fsyncs
// it before it returns, which makes about one recorded commit in 80 take
// 16–100 ms on a loaded machine.
// Instead a goroutine with a connection of its own runs a PASSIVE
// checkpoint every checkpointCommits commits (or after checkpointInterval
// when fewer came): it copies the WAL into the database file without
// waiting for or blocking the writer or readers.
//
// A PASSIVE checkpoint cannot make the WAL start over while commits keep
// coming (frames appended while it copies are not copied, and SQLite
// restarts the WAL only when every frame was). So once the WAL holds more
// than restartWALBytes, a RESTART checkpoint follows: it holds new writers
// off while it copies the few frames PASSIVE left and fsyncs the database
// file, waits (at most checkpointBusy) for readers to leave the WAL, and
// the next commit writes the WAL from its start again. While it runs it
// holds this Store's writer connection, so that it does not have to wait
// for a gap between this process's commits (SQLite's busy wait does not
// queue, and a busy writer would starve it). When the WAL file
// is larger than maxWALBytes (a reader pinned an old snapshot for a long
// time), TRUNCATE does the same and also truncates the file to zero bytes;
// journal_size_limit on the writer shrinks it too when the WAL restarts.
// A RESTART or TRUNCATE that times out on readers is tried again with
// back-off, so writers are not held up every round.
//
// Durability does not depend on checkpoints: every commit is fsynced into
// the WAL (synchronous=FULL), and a database opened after a crash replays
// the WAL. The checkpointer's connection uses synchronous=FULL too, so a
// checkpoint fsyncs the WAL before it copies and the database file before
// the WAL may start over.
const (
	checkpointCommits  = 64
	checkpointInterval = time.Second
	restartWALBytes    = 4 << 20
	maxWALBytes        = 64 << 20
	// checkpointBusy bounds how long a RESTART or TRUNCATE checkpoint
	// waits for readers and the writer (it holds up new writers meanwhile).
	checkpointBusy = 250 * time.Millisecond
	// maxCheckpointBackoff caps the wait between failed RESTARTs.
	maxCheckpointBackoff = 30 * time.Second
)

// pragmaAutocheckpointOff stops the writer from checkpointing inside its
// commits; the checkpointer does it.
const pragmaAutocheckpointOff = "wal_autocheckpoint(0)"

// pragmaJournalSizeLimit makes a WAL that starts over shrink back to the
// bound when it had grown past it.
var pragmaJournalSizeLimit = fmt.Sprintf("journal_size_limit(%d)", maxWALBytes)

// checkpointConfig tunes the checkpointer (tests shrink it).
type checkpointConfig struct {
	commits  int64         // checkpoint after this many commits
	interval time.Duration // or after this long, when any commit came
	restart  int64         // RESTART beyond this many bytes in the WAL
	maxWAL   int64         // TRUNCATE when the WAL file is larger
	busy     time.Duration // RESTART's wait for readers and the writer
}

func defaultCheckpointConfig() checkpointConfig {
	return checkpointConfig{
		commits: checkpointCommits, interval: checkpointInterval,
		restart: restartWALBytes, maxWAL: maxWALBytes, busy: checkpointBusy,
	}
}

// checkpointDSN is the DSN of the checkpointer's connection.
func checkpointDSN(path string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", pragmaSyncFull)
	return path + "?" + q.Encode()
}

// checkpointer runs WAL checkpoints on its own connection until stopped.
type checkpointer struct {
	cfg     checkpointConfig
	path    string
	db      *sql.DB
	logger  *slog.Logger
	commits atomic.Int64  // commits so far
	kick    chan struct{} // a checkpoint is due (buffered, 1)
	quit    chan struct{}
	done    chan struct{}
	stop    context.CancelFunc

	pageSize int64
	// hold keeps this process's commits out until release is called.
	hold func(ctx context.Context) (release func(), err error)

	// Observed by tests.
	runs     atomic.Int64 // checkpoints done
	restarts atomic.Int64 // RESTART or TRUNCATE checkpoints that completed
}

// startCheckpointer opens the checkpointer's connection and starts its
// goroutine.
func startCheckpointer(ctx context.Context, path string, cfg checkpointConfig, logger *slog.Logger,
	hold func(ctx context.Context) (release func(), err error),
) (*checkpointer, error) {
	db, err := sql.Open("sqlite", checkpointDSN(path, cfg.busy))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint connection: %w", plain(err))
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	var pageSize int64
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open checkpoint connection: %w", plain(err))
	}
	runCtx, stop := context.WithCancel(context.Background())
	c := &checkpointer{
		cfg: cfg, path: path, db: db, logger: logger, stop: stop, pageSize: pageSize, hold: hold,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go c.loop(runCtx)
	return c, nil
}

// committed counts a writer commit and wakes the goroutine every
// cfg.commits commits.
func (c *checkpointer) committed() {
	if c.commits.Add(1)%c.cfg.commits != 0 {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close stops the goroutine (interrupting a checkpoint in progress) and
// closes its connection. Idempotent only through Store.Close's guard.
func (c *checkpointer) close() error {
	close(c.quit)
	c.stop()
	<-c.done
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("close checkpoint connection: %w", plain(err))
	}
	return nil
}

func (c *checkpointer) loop(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(c.cfg.interval)
	defer t.Stop()
	var (
		last      int64     // commits at the last checkpoint
		pending   bool      // a RESTART is due
		notBefore time.Time // back-off after a busy RESTART
		backoff   = c.cfg.interval
	)
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		case <-t.C:
		}
		n := c.commits.Load()
		if n == last && !pending {
			continue
		}
		last = n
		frames, err := c.checkpoint(ctx, "PASSIVE")
		if err != nil {
			c.warn(ctx, "PASSIVE", err)
			continue
		}
		size := c.walFileSize()
		pending = frames*c.pageSize > c.cfg.restart || size > c.cfg.maxWAL
		if !pending || time.Now().Before(notBefore) {
			continue
		}
		mode := "RESTART"
		if size > c.cfg.maxWAL {
			mode = "TRUNCATE"
		}
		busy, err := c.restart(ctx, mode)
		switch {
		case err != nil:
			c.warn(ctx, mode, err)
		case busy:
			// Readers held on: try again later, waiting longer each
			// time so writers are not held up every round.
			notBefore = time.Now().Add(backoff)
			c.logger.Info("WAL checkpoint busy; retried later", "mode", mode,
				"wal_bytes", frames*c.pageSize, "retry_in", backoff)
			backoff = min(2*backoff, maxCheckpointBackoff)
		default:
			pending, backoff, notBefore = false, c.cfg.interval, time.Time{}
		}
	}
}

func (c *checkpointer) warn(ctx context.Context, mode string, err error) {
	if ctx.Err() == nil {
		c.logger.Warn("WAL checkpoint failed", "mode", mode, "error", err)
	}
}

// checkpoint runs a PASSIVE checkpoint and returns how many frames the WAL
// holds.
func (c *checkpointer) checkpoint(ctx context.Context, mode string) (frames int64, err error) {
	var busy, checkpointed int64
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &frames, &checkpointed); err != nil {
		return 0, err
	}
	c.runs.Add(1)
	return max(frames, 0), nil
}

// restart runs a RESTART or TRUNCATE checkpoint; busy reports that it
// could not finish within the busy timeout.
func (c *checkpointer) restart(ctx context.Context, mode string) (busy bool, err error) {
	release, err := c.hold(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	var b, frames, checkpointed int64
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&b, &frames, &checkpointed); err != nil {
		return false, err
	}
	if b != 0 {
		return true, nil
	}
	c.runs.Add(1)
	c.restarts.Add(1)
	return false, nil
}

// walFileSize is the size of the WAL file (0 when there is none).
func (c *checkpointer) walFileSize() int64 {
	fi, err := os.Stat(c.path + "-wal")
	if err != nil {
		return 0
	}
	return fi.Size()
}
