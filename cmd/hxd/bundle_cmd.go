package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"

	hxhttp "hxd/internal/http"
	"hxd/internal/hxbundle"
	hxruntime "hxd/internal/runtime"
	"hxd/internal/store/postgres"
	"hxd/internal/store/sqlite"
)

// This file holds the flight-recorder commands: `hxd export` (offline, on
// a SQLite file or a PostgreSQL schema, resuming nothing), `hxd verify` and
// `hxd playback` (on a bundle file, touching no store, model, tool or
// network).

const exportUsage = `Usage:
  hxd export (--db FILE | --database-url URL [--schema S]) --session ID --run ID
             --output FILE.hx [--include-payloads] [--include-artifacts]
             [--redact-file RULES.json] [--bundle-signing-key KEY.pem]

Exports a recorded run from a SQLite file or a PostgreSQL schema as a .hx
bundle. The store is opened read-only as far as hxd is concerned (no
migration, no lease taken, nothing resumed), so it works on the store of a
crashed process and beside running ones. The bundle is published atomically
with mode 0600; an existing file is never replaced. It is signed like the
server's exports: with --bundle-signing-key, else (SQLite) with the key in
<db>.hxd, created if missing; PostgreSQL requires the flag. Exit code 0 on success,
1 on any failure, 2 on bad usage.

Flags:
`

const verifyUsage = `Usage:
  hxd verify [--json] [--trust FILE|URL]... FILE.hx

Verifies a bundle and prints the report, with its signature: valid,
invalid (changed after signing), absent or unknown_key (signed by a key
not trusted; without --trust no key is). --trust names PEM public keys or
a JWKS, as a file or an http(s) URL (such as a server's
/.well-known/hxd-bundle-keys); it may be repeated. Exit code 0 when valid
and complete, 1 when valid but incomplete, 2 when invalid or unreadable,
and, with --trust, 3 when the bundle is valid but its signature is not
valid for a trusted key (2 wins over 3).

Flags:
`

const playbackUsage = `Usage:
  hxd playback FILE.hx

Verifies a bundle and prints its model and tool timeline. Nothing is
executed. Exit code 0 for a valid bundle, 2 when invalid or unreadable.
`

// Exit codes of verify and playback.
const (
	exitIncomplete = 1
	exitInvalid    = 2
	// exitUntrusted: verify --trust on a valid bundle whose signature is
	// not valid for a trusted key.
	exitUntrusted = 3
)

// exportConfig is what `hxd export` reads from its flags.
type exportConfig struct {
	DB, Session, Run, Output string
	// PG names the PostgreSQL database and schema instead of DB.
	PG               pgOptions
	IncludePayloads  bool
	IncludeArtifacts bool
	// RedactFile holds a JSON array of redaction rules. Optional.
	RedactFile string
	// Bundle is --bundle-signing-key: serve's key rules (bundle_keys.go).
	Bundle bundleKeyConfig
}

func parseExportFlags(args []string, e env) (*exportConfig, error) {
	c := &exportConfig{}
	flags := flag.NewFlagSet("export", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, exportUsage); flags.PrintDefaults() }
	flags.StringVar(&c.DB, "db", "", "SQLite database file (this or --database-url)")
	ef := newEnvFlags(flags, e)
	c.PG.register(flags, ef, false)
	flags.StringVar(&c.Session, "session", "", "session id (required)")
	flags.StringVar(&c.Run, "run", "", "run id (required)")
	flags.StringVar(&c.Output, "output", "", "bundle file to create (required; never overwritten)")
	flags.BoolVar(&c.IncludePayloads, "include-payloads", false, "export payloads (auto-redacted); default: metadata only")
	flags.BoolVar(&c.IncludeArtifacts, "include-artifacts", false, "add the referenced artifacts (needs --include-payloads)")
	flags.StringVar(&c.RedactFile, "redact-file", "", "JSON file holding an array of redaction rules")
	c.Bundle.register(flags, ef, false)
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &exitError{code: 0}
		}
		return nil, &exitError{code: 2, err: err}
	}
	if flags.NArg() > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("export takes no arguments, got %q", flags.Args())}
	}
	set, err := ef.apply()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	if err := c.PG.resolve("export", set, e, false, false); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	if set["schema"] && c.PG.URL == "" {
		return nil, &exitError{code: 2, err: errors.New("--schema needs --database-url")}
	}
	if c.IncludeArtifacts && !c.IncludePayloads {
		return nil, &exitError{code: 2, err: errors.New("--include-artifacts needs --include-payloads")}
	}
	var missing []string
	if c.DB == "" && c.PG.URL == "" {
		missing = append(missing, "--db or --database-url")
	}
	for _, f := range []struct{ name, v string }{{"--session", c.Session}, {"--run", c.Run}, {"--output", c.Output}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, &exitError{code: 2, err: fmt.Errorf("export needs %s", strings.Join(missing, ", "))}
	}
	if err := checkOutputFlag(c.Output); err != nil {
		return nil, err
	}
	if err := c.Bundle.validate(c.PG.URL != ""); err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return c, nil
}

// exportCmd is `hxd export`.
func exportCmd(ctx context.Context, args []string, e env) (err error) {
	cfg, err := parseExportFlags(args, e)
	if err != nil {
		return err
	}
	policy := hxbundle.Policy{IncludePayloads: cfg.IncludePayloads, IncludeArtifacts: cfg.IncludeArtifacts}
	if cfg.RedactFile != "" {
		if policy.Redact, err = readRedactFile(cfg.RedactFile); err != nil {
			return &exitError{code: 1, err: err}
		}
	}
	if err := policy.Validate(); err != nil {
		return &exitError{code: 1, err: err}
	}
	if err := refuseExisting(cfg.Output); err != nil {
		return err
	}

	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := openExportStore(ctx, cfg, log)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	// After the store opened: a missing SQLite file gets no data folder.
	sqliteDB := ""
	if cfg.PG.URL == "" {
		sqliteDB = cfg.DB
	}
	if policy.Signer, _, err = cfg.Bundle.load(sqliteDB); err != nil {
		return &exitError{code: 1, err: err}
	}

	fmt.Fprintf(e.stderr, "exporting run %s of session %s…\n", cfg.Run, cfg.Session)
	archive, rep, err := hxhttp.ExportBundle(ctx, func(fn func(*hxruntime.Incident) error) error {
		return hxruntime.ExportOffline(ctx, store, cfg.Session, cfg.Run, fn)
	}, hxhttp.BundleOptions{
		Policy:       policy,
		Version:      version,
		ProgressFunc: func(n int) { fmt.Fprintf(e.stderr, "exporting run %s: %d records…\n", cfg.Run, n) },
	})
	if err != nil {
		return &exitError{code: 1, err: exportFailure(cfg, err)}
	}
	defer func() { err = errors.Join(err, archive.Close()) }() // the spool file
	if err := archive.Publish(cfg.Output); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &exitError{code: 1, err: existsError(cfg.Output)}
		}
		return &exitError{code: 1, err: err}
	}
	fmt.Fprintf(e.stderr, "wrote %s (%d bytes, %d records)\n", cfg.Output, archive.Size(), rep.RecordCount)
	return nil
}

// exportStore is what export reads: a store it closes.
type exportStore interface {
	hxruntime.Store
	Close() error
}

// openExportStore opens the SQLite file or the PostgreSQL schema of cfg,
// validating its schema without migrating it (PostgreSQL: a pool of two
// connections, no lease taken).
func openExportStore(ctx context.Context, cfg *exportConfig, log *slog.Logger) (exportStore, error) {
	if cfg.PG.URL == "" {
		st, err := sqlite.Open(ctx, sqlite.Config{Path: cfg.DB, Logger: log}) // validate only: never migrates
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", cfg.DB, err)
		}
		return st, nil
	}
	pcfg := cfg.PG.config(log)
	pcfg.AutoMigrate, pcfg.PoolSize = false, 2
	st, err := postgres.Open(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err) // never holds the password
	}
	return st, nil
}

// exportSource names the store of cfg in messages (never the URL).
func exportSource(cfg *exportConfig) string {
	if cfg.PG.URL != "" {
		return "PostgreSQL schema " + strconv.Quote(cfg.PG.Schema)
	}
	return cfg.DB
}

// exportFailure explains a failed export to an operator.
func exportFailure(cfg *exportConfig, err error) error {
	var le *hxbundle.LimitError
	switch {
	case errors.Is(err, hxruntime.ErrNotFound):
		return fmt.Errorf("run %s of session %s not found in %s", cfg.Run, cfg.Session, exportSource(cfg))
	case errors.Is(err, hxruntime.ErrRecordingDisabled):
		return fmt.Errorf("run %s was not recorded: flight recording was not enabled for this run", cfg.Run)
	case errors.As(err, &le):
		return fmt.Errorf("export run %s: %s", cfg.Run, le.Message)
	}
	return fmt.Errorf("export run %s: %w", cfg.Run, err)
}

// checkOutputFlag refuses "--output -": a bundle is always written to a
// file (never to stdout), and a file named "-" is never what was meant.
func checkOutputFlag(output string) error {
	if output == "-" {
		return &exitError{code: 2, err: errors.New("--output - is not supported: a bundle is written to a file, name one")}
	}
	return nil
}

// refuseExisting fails (exit 1) when path exists; Publish checks again
// atomically, this only spares the work.
func refuseExisting(path string) error {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return &exitError{code: 1, err: existsError(path)}
	case !errors.Is(err, fs.ErrNotExist):
		return &exitError{code: 1, err: fmt.Errorf("check output: %w", err)}
	}
	return nil
}

func existsError(path string) error {
	return fmt.Errorf("%s already exists: hxd never overwrites a bundle, choose another --output", path)
}

// readRedactFile reads a JSON array of redaction rules (DESIGN §4).
func readRedactFile(path string) ([]hxbundle.Rule, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read redaction rules: %w", err)
	}
	var rules []hxbundle.Rule
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("redaction rules %s must be a JSON array of rules: %s", path, describeRulesError(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("redaction rules %s: trailing data after the array", path)
	}
	return rules, nil
}

// describeRulesError explains a decoding error of a redaction rules file
// without Go type names.
func describeRulesError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return "got " + te.Value
	case errors.As(err, &te):
		return fmt.Sprintf("%s: got %s", te.Field, te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the file ends early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// verifyCmd is `hxd verify [--json] FILE`.
func verifyCmd(ctx context.Context, args []string, e env) (err error) {
	flags := flag.NewFlagSet("verify", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, verifyUsage); flags.PrintDefaults() }
	asJSON := flags.Bool("json", false, "print the report as JSON")
	var trust []string
	flags.Func("trust", "trusted public keys: a PEM or JWKS `FILE|URL` (repeatable)", func(v string) error {
		trust = append(trust, v)
		return nil
	})
	path, err := parseFileArg(flags, args, "verify")
	if err != nil {
		return err
	}
	keys := hxbundle.NewKeySet()
	for _, src := range trust {
		if err := loadTrust(ctx, keys, src); err != nil {
			return &exitError{code: exitInvalid, err: err}
		}
	}
	f, size, err := openBundle(path)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	rep := hxbundle.VerifyWithKeys(f, size, hxbundle.DefaultLimits, keys)
	if rep.Issues == nil {
		rep.Issues = []string{}
	}
	if rep.Details == nil {
		rep.Details = []hxbundle.Detail{}
	}
	if *asJSON {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
		fmt.Fprintln(e.stdout, string(out))
	} else {
		printReport(e.stdout, rep)
	}
	switch {
	case !rep.Valid:
		return &exitError{code: exitInvalid}
	case len(trust) > 0 && (rep.Signature == nil || rep.Signature.Status != hxbundle.SignatureValid):
		return &exitError{code: exitUntrusted}
	case !rep.Complete:
		return &exitError{code: exitIncomplete}
	}
	return nil
}

// printReport prints a report as text: the verdict line, the issues one
// per line, then the details.
func printReport(w io.Writer, rep hxbundle.Report) {
	fmt.Fprintf(w, "valid: %t, complete: %t, records: %d\n", rep.Valid, rep.Complete, rep.RecordCount)
	for _, is := range rep.Issues {
		fmt.Fprintln(w, is)
	}
	for _, d := range rep.Details {
		fmt.Fprintln(w, "  "+detailText(d))
	}
	if s := rep.Signature; s != nil {
		if s.Kid != "" {
			fmt.Fprintf(w, "signature: %s (kid %s)\n", s.Status, s.Kid)
		} else {
			fmt.Fprintf(w, "signature: %s\n", s.Status)
		}
	}
}

// detailText renders a detail on one line.
func detailText(d hxbundle.Detail) string {
	parts := []string{d.Issue + ":"}
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	add("member", d.Member)
	if d.Seq > 0 {
		add("seq", fmt.Sprint(d.Seq))
	}
	add("kind", d.Kind)
	add("execution_key", d.ExecutionKey)
	add("step", d.StepID)
	add("attempt", d.AttemptID)
	if d.Message != "" {
		parts = append(parts, "("+d.Message+")")
	}
	return strings.Join(parts, " ")
}

// playbackCmd is `hxd playback FILE`.
func playbackCmd(_ context.Context, args []string, e env) (err error) {
	flags := flag.NewFlagSet("playback", flag.ContinueOnError)
	flags.SetOutput(e.stderr)
	flags.Usage = func() { fmt.Fprint(e.stderr, playbackUsage) }
	path, err := parseFileArg(flags, args, "playback")
	if err != nil {
		return err
	}
	f, size, err := openBundle(path)
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	played, err := hxbundle.Playback(f, size, hxbundle.DefaultLimits)
	var ie *hxbundle.InvalidError
	if errors.As(err, &ie) {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s is not a valid bundle: %s", path, ie.Message)}
	}
	if err != nil {
		return &exitError{code: exitInvalid, err: err}
	}
	if err := printTimeline(e.stdout, played, true); err != nil {
		return err
	}
	printVerified(e.stdout, played)
	if !played.Report.Complete {
		fmt.Fprintln(e.stdout, "Incomplete:", strings.Join(played.Report.Issues, ", "))
	}
	return nil
}

// parseFileArg parses exactly one file argument and flags, before or
// after it ("verify X.hx --json" as "verify --json X.hx").
func parseFileArg(flags *flag.FlagSet, args []string, cmd string) (string, error) {
	var files []string
	for {
		if err := flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", &exitError{code: 0}
			}
			return "", &exitError{code: 2, err: err}
		}
		if flags.NArg() == 0 {
			break
		}
		files = append(files, flags.Arg(0))
		args = flags.Args()[1:]
	}
	if len(files) != 1 {
		flags.Usage()
		return "", &exitError{code: 2, err: fmt.Errorf("%s takes one bundle file, got %d arguments", cmd, len(files))}
	}
	return files[0], nil
}

// openBundle opens a bundle file for reading. Anything but a regular file
// is refused before it is opened: opening a named pipe would block until a
// writer appears.
func openBundle(path string) (*os.File, int64, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("cannot read bundle %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read bundle: %w", err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("cannot read bundle %s: %w", path, err)
	}
	return f, st.Size(), nil
}

// timelineRecord is what the timeline shows of a record.
type timelineRecord struct {
	Seq          int     `json:"seq"`
	Kind         string  `json:"kind"`
	StepID       string  `json:"step_id"`
	AttemptID    string  `json:"attempt_id"`
	ExecutionKey *string `json:"execution_key"`
}

// printTimeline prints every model.* and tool.* record as the reference's
// example does (`f"{seq:3} step={step_id} attempt={attempt_id} {kind}"`),
// with the execution key of tool records when withKey.
func printTimeline(w io.Writer, played *hxbundle.Played, withKey bool) error {
	for _, raw := range played.Records {
		r, err := decodeTimeline(raw)
		if err != nil {
			return fmt.Errorf("decode record: %w", err)
		}
		if !strings.HasPrefix(r.Kind, "model.") && !strings.HasPrefix(r.Kind, "tool.") {
			continue
		}
		line := fmt.Sprintf("%3d step=%s attempt=%s %s", r.Seq, r.StepID, r.AttemptID, r.Kind)
		if withKey && strings.HasPrefix(r.Kind, "tool.") && r.ExecutionKey != nil {
			line += " key=" + *r.ExecutionKey
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

// decodeTimeline reads the timeline's fields of a record by their exact
// keys. (Decoding into timelineRecord would match keys case-insensitively:
// a record may carry extra keys, and "KIND" or "Seq" would then overwrite
// what the verifier checked.)
func decodeTimeline(raw []byte) (timelineRecord, error) {
	var fields map[string]json.RawMessage
	var r timelineRecord
	if err := json.Unmarshal(raw, &fields); err != nil {
		return r, err
	}
	for _, f := range []struct {
		key string
		dst any
	}{{"seq", &r.Seq}, {"kind", &r.Kind}, {"step_id", &r.StepID}, {"attempt_id", &r.AttemptID}, {"execution_key", &r.ExecutionKey}} {
		if v, ok := fields[f.key]; ok {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return r, fmt.Errorf("%s: %w", f.key, err)
			}
		}
	}
	return r, nil
}

// printVerified prints the reference's closing line.
func printVerified(w io.Writer, played *hxbundle.Played) {
	fmt.Fprintf(w, "Verified %d records. Playback made zero model/tool calls.\n", played.Report.RecordCount)
}
