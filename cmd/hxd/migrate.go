package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"hxd/internal/store/postgres"
	"hxd/internal/store/sqlite"
)

// migrateCmd is `hxd migrate [--database-url URL] [--schema S] [--db F]`:
// it applies pending migrations explicitly (PostgreSQL start-up only
// validates unless --auto-migrate).
func migrateCmd(ctx context.Context, args []string, e env) error {
	var pg pgOptions
	var db string
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	ef := newEnvFlags(fs, e)
	pg.register(fs, ef, false)
	fs.StringVar(&db, "db", "", "SQLite database file to migrate")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &exitError{code: 0}
		}
		return &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("migrate takes no arguments, got %q", fs.Args())}
	}
	set, err := ef.apply()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// --db and --database-url together migrate both.
	if err := pg.resolve("migrate", set, e, false, true); err != nil {
		return &exitError{code: 2, err: err}
	}
	if pg.URL == "" && db == "" {
		return &exitError{code: 2, err: errors.New("migrate needs --database-url (or DATABASE_URL) and/or --db")}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if pg.URL != "" {
		if err := postgres.Migrate(ctx, postgres.Config{URL: pg.URL, Schema: pg.Schema, Logger: log}); err != nil {
			return err // never holds the password
		}
		fmt.Fprintf(e.stdout, "PostgreSQL schema %q is up to date.\n", pg.Schema)
	}
	if db != "" {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: db, Logger: log, AutoMigrate: true})
		if err != nil {
			return fmt.Errorf("migrate sqlite %s: %w", db, err)
		}
		if err := st.Close(); err != nil {
			return fmt.Errorf("migrate sqlite: %w", err)
		}
		fmt.Fprintf(e.stdout, "SQLite database %s is up to date.\n", db)
	}
	return nil
}
