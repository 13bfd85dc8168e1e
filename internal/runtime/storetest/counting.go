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
// in them, which tells the store's share of a run from the runtime's.
type CountingStore struct {
	rtstore.Store
	Commits atomic.Int64
	Elapsed atomic.Int64 // nanoseconds
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
	c.Commits.Add(1)
	c.Elapsed.Add(int64(time.Since(start)))
}
