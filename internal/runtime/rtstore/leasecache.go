package rtstore

import "sync"

// LeaseCache remembers a value per run between the commits of one lease:
// what a store learned in one commit (the run's last seqs, its status …)
// and may trust in the next. That holds because only the lease holder
// writes a run's rows (every write is fenced) and a lease token is never
// reused; a store forgets an entry on any failure, and a commit of the run
// without a lease (not fenced) drops it. Entries are valid only
// for the token that put them. The cache is bounded: when full it is
// cleared, and a cold entry costs the store a few reads. The zero value is
// ready for use; it is safe for concurrent use.
type LeaseCache[V any] struct {
	mu   sync.Mutex
	runs map[string]leaseEntry[V]
}

type leaseEntry[V any] struct {
	token string
	v     V
}

// leaseCacheMax bounds a LeaseCache.
const leaseCacheMax = 10000

// Get returns the value cm's lease put for cm's run; false without a lease
// or an entry of that lease.
func (c *LeaseCache[V]) Get(cm *Commit) (V, bool) {
	var zero V
	if cm.Lease == nil {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.runs[cm.RunID]; ok && e.token == cm.Lease.Token() {
		return e.v, true
	}
	return zero, false
}

// Put records v for cm's run under cm's lease. A commit without a lease
// is not fenced: it drops what any lease learned of the run instead.
func (c *LeaseCache[V]) Put(cm *Commit, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cm.Lease == nil {
		delete(c.runs, cm.RunID)
		return
	}
	if c.runs == nil {
		c.runs = map[string]leaseEntry[V]{}
	}
	if len(c.runs) >= leaseCacheMax {
		clear(c.runs)
	}
	c.runs[cm.RunID] = leaseEntry[V]{token: cm.Lease.Token(), v: v}
}

// Update calls f with each entry put under token, for f to change.
func (c *LeaseCache[V]) Update(token string, f func(runID string, v *V)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.runs {
		if e.token == token {
			f(id, &e.v)
			c.runs[id] = e
		}
	}
}

// Forget drops runID's entry.
func (c *LeaseCache[V]) Forget(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.runs, runID)
}

// ForgetToken drops the entries of a released lease.
func (c *LeaseCache[V]) ForgetToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.runs {
		if e.token == token {
			delete(c.runs, id)
		}
	}
}
