package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rawSystem is single-row autocommit INSERTs (pgx) on a pool of
// min(c, cfg.RawConns) connections, so that up to that many commits are
// really in flight: one effect per commit, the floor of anything durable
// on this PostgreSQL. The cap keeps the run within max_connections (100
// by default) beside hxd's and DBOS's pools.
func (e *env) rawSystem(ctx context.Context) (*system, error) {
	db, url, err := e.createDB(ctx, sysRaw)
	if err != nil {
		return nil, err
	}
	setup, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	_, err = setup.Exec(ctx, `CREATE TABLE raw_commits (id bigserial PRIMARY KEY, payload text NOT NULL)`)
	_ = setup.Close(ctx)
	if err != nil {
		return nil, err
	}
	var pool *pgxpool.Pool
	e.closers = append(e.closers, func() {
		if pool != nil {
			pool.Close()
		}
	})
	s := &system{name: sysRaw, effects: 1, db: db}
	s.prepare = func(ctx context.Context, c int) error {
		if pool != nil {
			pool.Close()
		}
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return err
		}
		n := min(c, e.cfg.RawConns)
		pc.MaxConns, pc.MinConns = int32(n), int32(n)
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		// Open every connection before measuring.
		conns := make([]*pgxpool.Conn, n)
		for i := range conns {
			if conns[i], err = pool.Acquire(ctx); err != nil {
				return fmt.Errorf("connect: %w", err)
			}
		}
		for _, c := range conns {
			c.Release()
		}
		return nil
	}
	s.op = func(ctx context.Context, _ int) error {
		_, err := pool.Exec(ctx, `INSERT INTO raw_commits (payload) VALUES ($1)`, "x")
		return err
	}
	return s, nil
}
