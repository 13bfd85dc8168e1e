package storetest

import (
	"context"
	"sync/atomic"
	"time"

	"hxd/internal/runtime/rtstore"
)

// CountingStore wraps a Store and counts its boundary commits: Commit and
// RunInsert (a run's first boundary, run.started). The throughput
// benchmarks of both stores divide by it. Elapsed sums the wall time spent
// in them, which tells the store's share of a run from the runtime's;
// FirstEnd and LastEnd are when the first and the latest of them returned
// (Unix nanoseconds, 0 before any), so LastEnd-FirstEnd of one run is the
// time its steps took, without the run's set-up and wind-down.
type CountingStore struct {
	rtstore.Store
	Commits  atomic.Int64
	Elapsed  atomic.Int64 // nanoseconds
	FirstEnd atomic.Int64
	LastEnd  atomic.Int64
}

// Reset zeroes the counters and returns the commits counted.
func (c *CountingStore) Reset() int64 {
	c.Elapsed.Store(0)
	c.FirstEnd.Store(0)
	c.LastEnd.Store(0)
	return c.Commits.Swap(0)
}

func (c *CountingStore) Commit(ctx context.Context, cm *rtstore.Commit) error {
	defer c.count(time.Now())
	return c.Store.Commit(ctx, cm)
}

func (c *CountingStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	defer c.count(time.Now())
	return c.Store.RunInsert(ctx, p)
}

// count records one boundary commit that started at start.
func (c *CountingStore) count(start time.Time) {
	end := time.Now()
	c.Commits.Add(1)
	c.Elapsed.Add(int64(end.Sub(start)))
	c.FirstEnd.CompareAndSwap(0, end.UnixNano())
	c.LastEnd.Store(end.UnixNano())
}
