package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// noopStep is one DBOS step doing nothing: what remains is DBOS's own
// checkpoint of it.
func noopStep(context.Context) (int, error) { return 1, nil }

// dbosWorkflow runs n no-op steps, one after the other, as an hxd run
// makes its effects.
func dbosWorkflow(ctx dbos.Context, n int) (int, error) {
	sum := 0
	for range n {
		v, err := dbos.RunAsStep(ctx, noopStep)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// dbosSystem is DBOS Transact Go with its defaults (its system database
// of its own on the same PostgreSQL), running workflows of 21 no-op steps
// in the process and waiting for each one's result.
func (e *env) dbosSystem(ctx context.Context, _ int) (*system, error) {
	db, url, err := e.createDB(ctx, sysDBOS)
	if err != nil {
		return nil, err
	}
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		AppName: "hxd-peers", DatabaseURL: url,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, fmt.Errorf("dbos: %w", err)
	}
	dbos.RegisterWorkflow(dctx, dbosWorkflow)
	if err := dbos.Launch(dctx); err != nil {
		return nil, fmt.Errorf("dbos launch: %w", err)
	}
	e.closers = append(e.closers, func() { _ = dbos.Shutdown(dctx, 10*time.Second) })
	s := &system{name: sysDBOS, effects: effectsPerRun, db: db}
	s.op = func(context.Context, int) error {
		h, err := dbos.RunWorkflow(dctx, dbosWorkflow, effectsPerRun)
		if err != nil {
			return err
		}
		sum, err := h.GetResult()
		if err != nil {
			return err
		}
		if sum != effectsPerRun {
			return fmt.Errorf("dbos workflow: %d steps, want %d", sum, effectsPerRun)
		}
		return nil
	}
	return s, nil
}
