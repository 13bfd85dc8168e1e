// Command hxd runs durable AI-agent runs behind an HTTP/JSON API and keeps
// a flight recorder of them. It is the only package that reads flags and
// the environment and names concrete stores.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

// exitError carries a process exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// env is the process environment and standard streams, injected so the
// daemon runs in-process in tests.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	// onListen, when set, receives the bound address of `serve`.
	onListen func(addr string)
	// onDebugListen, when set, receives the bound address of --debug-addr.
	onDebugListen func(addr string)
	// exit terminates the process (HXD_CRASH_AFTER); default os.Exit.
	exit func(code int)
}

// lookupEnv reads an environment variable as os.LookupEnv does, an empty
// value counting as unset: how API key variables (api_key_env) are read,
// both when agents are loaded and when models are called.
func (e env) lookupEnv(name string) (string, bool) {
	v := e.getenv(name)
	return v, v != ""
}

// envFlags binds flags to environment variables. Flag defaults stay the
// built-in ones and the environment is read only after parsing, so usage
// (which prints defaults) never shows an environment value, which may hold
// a password; a flag given on the command line wins over its variable.
type envFlags struct {
	fs     *flag.FlagSet
	getenv func(string) string
	binds  []envBinding
}

// envBinding names the variables of one flag; the first non-empty one
// applies.
type envBinding struct {
	flag string
	vars []string
}

func newEnvFlags(fs *flag.FlagSet, e env) *envFlags {
	return &envFlags{fs: fs, getenv: e.getenv}
}

// bind makes vars set the flag name when the command line does not.
func (b *envFlags) bind(name string, vars ...string) {
	b.binds = append(b.binds, envBinding{flag: name, vars: vars})
}

// apply runs after fs is parsed: every bound flag not on the command line
// takes the value of its variable. It returns the names of the flags given
// on the command line, and an error naming each variable whose value the
// flag refuses (exit 2 for the caller). Only bool, int and duration flags
// refuse values: a string flag, such as a URL that may hold a password,
// never reaches the message.
func (b *envFlags) apply() (map[string]bool, error) {
	set := map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, bd := range b.binds {
		if set[bd.flag] {
			continue
		}
		for _, name := range bd.vars {
			v := b.getenv(name)
			if v == "" {
				continue
			}
			// Value.Set, not fs.Set: the flag still counts as not given.
			if err := b.fs.Lookup(bd.flag).Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("invalid value %q for %s (--%s): %w", v, name, bd.flag, err))
			}
			break
		}
	}
	return set, errors.Join(errs...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], env{getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, exit: os.Exit})
	stop()
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if ee == nil || ee.err != nil {
			fmt.Fprintln(os.Stderr, "hxd:", err)
		}
		os.Exit(code)
	}
}

const usage = `hxd — durable AI-agent runs with a flight recorder

Usage:
  hxd serve [flags]     run the HTTP API (see hxd serve -h)
  hxd worker --temporal-address A --s3-endpoint E --s3-bucket B [flags]
                        run a Temporal worker for serve --engine temporal (see hxd worker -h)
  hxd migrate [--database-url URL] [--schema S] [--db F]
                        apply storage migrations (PostgreSQL and/or SQLite)
  hxd export (--db F | --database-url URL [--schema S]) --session S --run R --output X.hx
                        export a recorded run from a store (see hxd export -h)
  hxd gc (--db F | --database-url URL [--schema S]) [--dry-run] [--older-than D] [--json]
                        delete finished sessions past retention (see hxd gc -h)
  hxd verify [--json] [--trust FILE|URL] X.hx
                        verify a bundle (exit 0 complete, 1 incomplete, 2 invalid,
                        3 signature not valid for a --trust key)
  hxd keygen --output FILE [--force]
                        create a bundle signing key (PKCS#8 PEM, 0600)
  hxd playback X.hx     print a bundle's model/tool timeline (executes nothing)
  hxd demo flight-recorder [--output F.hx]
                        reproduce the flight-recorder example
  hxd demo crash-recovery crash|status|resume [flags]
                        reproduce the crash-recovery example (exit 42)
  hxd mcp-demo-server   serve the demo MCP server on stdio (the mcp-demo agent's, --demo)
  hxd version           print the version

`

// run dispatches a subcommand.
func run(ctx context.Context, args []string, e env) error {
	if e.exit == nil {
		e.exit = os.Exit
	}
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return &exitError{code: 2}
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], e)
	case "worker":
		return worker(ctx, args[1:], e)
	case "demo":
		return demo(ctx, args[1:], e)
	case "migrate":
		return migrateCmd(ctx, args[1:], e)
	case "export":
		return exportCmd(ctx, args[1:], e)
	case "verify":
		return verifyCmd(ctx, args[1:], e)
	case "gc":
		return gcCmd(ctx, args[1:], e)
	case "keygen":
		return keygenCmd(args[1:], e)
	case "playback":
		return playbackCmd(ctx, args[1:], e)
	case mcpDemoServerCmd:
		return mcpDemoServer(ctx, args[1:])
	case "version", "--version", "-version":
		if len(args) > 1 {
			return &exitError{code: 2, err: fmt.Errorf("version takes no arguments, got %q", args[1:])}
		}
		fmt.Fprintln(e.stdout, "hxd", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprint(e.stderr, usage)
	return &exitError{code: 2, err: fmt.Errorf("unknown command %q", args[0])}
}
