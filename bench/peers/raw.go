package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// rawSystem is single-row autocommit INSERTs, each worker on a connection
// of its own (so that c commits are really in flight): one effect per
// commit, the floor of anything durable on this PostgreSQL.
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
	var conns []*pgx.Conn
	e.closers = append(e.closers, func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	})
	s := &system{name: sysRaw, effects: 1, db: db}
	s.prepare = func(ctx context.Context, c int) error {
		for len(conns) < c {
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			conns = append(conns, conn)
		}
		return nil
	}
	s.op = func(ctx context.Context, w int) error {
		_, err := conns[w].Exec(ctx, `INSERT INTO raw_commits (payload) VALUES ($1)`, "x")
		return err
	}
	return s, nil
}
