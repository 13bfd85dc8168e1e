package storetest

import (
	"context"
	"sync/atomic"

	"hxd/internal/runtime/rtstore"
)

// CountingStore wraps a Store and counts its boundary commits: Commit and
// RunInsert (a run's first boundary, run.started). The throughput
// benchmarks of both stores divide by it.
type CountingStore struct {
	rtstore.Store
	Commits atomic.Int64
}

func (c *CountingStore) Commit(ctx context.Context, cm *rtstore.Commit) error {
	c.Commits.Add(1)
	return c.Store.Commit(ctx, cm)
}

func (c *CountingStore) RunInsert(ctx context.Context, p *rtstore.RunInsertParams) (*rtstore.RunRow, bool, error) {
	c.Commits.Add(1)
	return c.Store.RunInsert(ctx, p)
}
