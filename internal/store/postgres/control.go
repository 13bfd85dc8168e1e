package postgres

import (
	"sync"
	"time"
)

// The runtime reads its session's control flag before every step, and it
// almost never changes. Every leased commit reads the flag anyway, in its
// transaction, next to the fence (the session row is locked there), and
// remembers it here: a read of the flag soon after a commit of the session
// by this Store returns that value instead of asking the database again.
// Since the driver's read follows its last commit at once, the value is as
// fresh as a query would be; a write of the flag by another process in
// between is seen by the next read that misses the cache, exactly as if
// it had come just after a query. Entries are trusted for controlFresh
// only, so a run that waits (a long tool call, no commits) polls the
// database as before, and local writes of the flag (SessionControlSet,
// RunInsert) and lease releases drop the entry at once.

// controlFresh is how long a flag read by a commit stands in for a query.
const controlFresh = 250 * time.Millisecond

// controlCache holds the control flag of sessions as their last commit by
// this Store read it.
type controlCache struct {
	mu    sync.Mutex
	m     map[string]controlEntry // by session id
	swept time.Time               // last sweep of stale entries
}

// controlEntry is a flag read by a commit, or (forgotten) a tombstone: a
// local write of the flag at at, which a commit that started earlier must
// not overwrite with what it read.
type controlEntry struct {
	value     string
	at        time.Time // when the commit that read it started, or the write
	forgotten bool
}

// controlSweepSize is the number of entries from which put drops stale ones
// (at most every controlFresh).
const controlSweepSize = 1024

// put records value, read by a commit of session id that started at at.
func (c *controlCache) put(id, value string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]controlEntry)
	}
	if e, ok := c.m[id]; ok && e.at.After(at) {
		return // a later read or write is already there
	}
	c.m[id] = controlEntry{value: value, at: at}
	if len(c.m) >= controlSweepSize && time.Since(c.swept) >= controlFresh {
		c.swept = time.Now()
		for k, e := range c.m {
			if c.swept.Sub(e.at) >= controlFresh {
				delete(c.m, k)
			}
		}
	}
}

// get returns session id's flag if a commit read it less than
// controlFresh ago and no local write came since.
func (c *controlCache) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	switch {
	case !ok:
		return "", false
	case time.Since(e.at) >= controlFresh:
		delete(c.m, id)
		return "", false
	case e.forgotten:
		return "", false
	}
	return e.value, true
}

// forget drops session id's entry: the flag is being written. Call it
// before and after the write.
func (c *controlCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]controlEntry)
	}
	c.m[id] = controlEntry{at: time.Now(), forgotten: true}
}
