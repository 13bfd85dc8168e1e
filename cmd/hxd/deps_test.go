package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rules of STYLE.md §2.1, made executable (G1). Each rule names
// the packages it applies to and either the dependencies they must not have
// or the only packages of this module they may depend on. Dependencies are
// transitive and non-test (`go list -deps` without -test), so a forbidden
// package reached through a third one is caught too, and an import from a
// _test.go file is not counted. A rule whose packages do not exist yet is
// skipped.

// depsModule is this module's path.
const depsModule = "hxd"

// depsDBDrivers are the database drivers (and the migration library that
// wraps them): only store/* and cmd/hxd may depend on them.
var depsDBDrivers = []string{
	"modernc.org/sqlite/...",
	"github.com/jackc/pgx/...",
	"github.com/golang-migrate/migrate/...",
	"github.com/lib/pq/...",
	"github.com/mattn/go-sqlite3/...",
}

// depsRule is one import rule. Patterns are import paths; a trailing "/..."
// matches the path itself and everything below it.
type depsRule struct {
	name string
	// pkgs are the packages the rule applies to.
	pkgs []string
	// except are packages matched by pkgs that the rule exempts.
	except []string
	// direct checks the package's own imports instead of all its dependencies.
	direct bool
	// forbid are dependencies the packages must not have.
	forbid []string
	// onlyOurs, when non-nil, lists the only packages of this module the
	// packages may depend on (their own subpackages aside, add them here).
	onlyOurs []string
	// stdOnly forbids every dependency outside this module and the
	// standard library.
	stdOnly bool
}

var depsRules = []depsRule{
	{
		name: "runtime has no HTTP server, store, driver or engine",
		pkgs: []string{"hxd/internal/runtime/..."},
		forbid: slices.Concat([]string{
			"hxd/internal/http/...",
			"hxd/internal/store/...",
			"hxd/internal/temporal/...",
			"github.com/go-chi/...",
			"github.com/oapi-codegen/...",
			"github.com/getkin/kin-openapi/...",
			"go.temporal.io/...",
			// Spans go through the OpenTelemetry API (Config.TracerProvider);
			// the SDK, its exporters and samplers are cmd/hxd's to set up.
			"go.opentelemetry.io/otel/sdk/...",
		}, depsDBDrivers),
	},
	{
		name:     "rtstore is a leaf over journal",
		pkgs:     []string{"hxd/internal/runtime/rtstore/..."},
		forbid:   []string{"net/http/...", "database/sql/..."},
		onlyOurs: []string{"hxd/internal/journal/...", "hxd/internal/runtime/rtstore/..."},
	},
	{
		name:     "hxbundle imports only journal",
		pkgs:     []string{"hxd/internal/hxbundle/..."},
		onlyOurs: []string{"hxd/internal/journal/...", "hxd/internal/hxbundle/..."},
	},
	{
		name:     "journal imports nothing of ours",
		pkgs:     []string{"hxd/internal/journal/..."},
		onlyOurs: []string{"hxd/internal/journal/..."},
	},
	{
		name:     "http/api imports nothing of ours",
		pkgs:     []string{"hxd/internal/http/api/..."},
		onlyOurs: []string{"hxd/internal/http/api/..."},
	},
	{
		name:     "api (the contract file) imports nothing of ours",
		pkgs:     []string{"hxd/api"},
		onlyOurs: []string{"hxd/api"},
	},
	{
		name:     "ui (the console's files) imports nothing of ours",
		pkgs:     []string{"hxd/internal/ui/..."},
		onlyOurs: []string{"hxd/internal/ui/..."},
		stdOnly:  true,
	},
	{
		// .golangci.yml allows it OpenTelemetry and the standard library
		// only, directly.
		name:     "telemetry imports nothing of ours",
		pkgs:     []string{"hxd/internal/telemetry/..."},
		onlyOurs: []string{"hxd/internal/telemetry/..."},
	},
	{
		// Below every layer (model, tool and mcp use its transport).
		name:   "telemetry/propagate uses the OpenTelemetry API, not its SDK",
		pkgs:   []string{"hxd/internal/telemetry/propagate"},
		forbid: []string{"go.opentelemetry.io/otel/sdk/...", "go.opentelemetry.io/otel/exporters/..."},
	},
	{
		name:     "migrations import nothing of ours",
		pkgs:     []string{"hxd/migrations/..."},
		onlyOurs: []string{"hxd/migrations/..."},
	},
	{
		name: "agent, model and tool stay below runtime",
		pkgs: []string{"hxd/internal/agent/...", "hxd/internal/model/...", "hxd/internal/tool/..."},
		forbid: []string{
			"hxd/internal/runtime/...",
			"hxd/internal/store/...",
			"hxd/internal/temporal/...",
			"hxd/internal/http/...",
		},
	},
	{
		name: "http has no store, engine or DB driver",
		pkgs: []string{"hxd/internal/http/..."},
		forbid: slices.Concat([]string{
			"hxd/internal/store/...",
			"hxd/internal/temporal/...",
			"go.temporal.io/...",
		}, depsDBDrivers),
	},
	{
		// The store-neutral logic both stores share (schema check, seq
		// cache, cursors): no store, runtime root, driver or HTTP.
		name: "store/storekit imports only rtstore, journal, migrations and the standard library",
		pkgs: []string{"hxd/internal/store/storekit/..."},
		forbid: slices.Concat([]string{
			"database/sql/driver",
			"net/http/...",
		}, depsDBDrivers),
		onlyOurs: []string{
			"hxd/internal/runtime/rtstore/...",
			"hxd/internal/journal/...",
			"hxd/migrations/...",
			"hxd/internal/store/storekit/...",
		},
		stdOnly: true,
	},
	{
		name:   "store/sqlite is independent of store/postgres and http",
		pkgs:   []string{"hxd/internal/store/sqlite/..."},
		forbid: []string{"hxd/internal/store/postgres/...", "hxd/internal/http/..."},
	},
	{
		name:   "store/postgres is independent of store/sqlite and http",
		pkgs:   []string{"hxd/internal/store/postgres/..."},
		forbid: []string{"hxd/internal/store/sqlite/...", "hxd/internal/http/..."},
	},
	{
		// Only cmd/hxd may import internal/temporal, so every other package
		// must be free of the SDK, even transitively.
		name:   "Temporal SDK only below internal/temporal",
		pkgs:   []string{"hxd/..."},
		except: []string{"hxd/internal/temporal/...", "hxd/cmd/..."},
		forbid: []string{"go.temporal.io/sdk/..."},
	},
	{
		// Direct imports, tests excluded: only the engine package tree
		// names SDK packages; cmd/hxd reaches the SDK through it.
		name:   "only internal/temporal/... imports go.temporal.io/sdk directly",
		pkgs:   []string{"hxd/..."},
		except: []string{"hxd/internal/temporal/..."},
		direct: true,
		forbid: []string{"go.temporal.io/sdk/..."},
	},
	{
		name:   "cmd does not use the Temporal SDK itself",
		pkgs:   []string{"hxd/cmd/..."},
		direct: true,
		forbid: []string{"go.temporal.io/sdk/..."},
	},
	{
		name:   "test helpers only from _test.go files",
		pkgs:   []string{"hxd/..."},
		except: []string{"hxd/internal/hxtest/...", "hxd/internal/runtime/storetest/..."},
		forbid: []string{"hxd/internal/hxtest/...", "hxd/internal/runtime/storetest/..."},
	},
}

func TestDeps(t *testing.T) {
	t.Parallel()
	graph := depsLoad(t)
	for _, rule := range depsRules {
		t.Run(rule.name, func(t *testing.T) {
			t.Parallel()
			var checked int
			for _, pkg := range graph.ours {
				if !depsMatchAny(pkg.ImportPath, rule.pkgs) || depsMatchAny(pkg.ImportPath, rule.except) {
					continue
				}
				checked++
				for _, v := range graph.violations(rule, pkg) {
					t.Error(v)
				}
			}
			if checked == 0 {
				t.Skipf("no package matches %v yet", rule.pkgs)
			}
		})
	}
}

// TestDepsViolations: the checks behind TestDeps report what each kind of
// rule forbids, here the storekit rule on made-up import graphs, so that a
// rule that cannot fail is caught.
func TestDepsViolations(t *testing.T) {
	t.Parallel()
	const storekit = "hxd/internal/store/storekit"
	var rule depsRule
	for _, r := range depsRules {
		if depsMatchAny(storekit, r.pkgs) && r.stdOnly {
			rule = r
		}
	}
	if rule.name == "" {
		t.Fatal("no stdOnly rule covers " + storekit)
	}
	std := []string{"context", "errors", "fmt", "log/slog", "strings", "database/sql", "database/sql/driver", "net/http"}
	tests := []struct {
		name    string
		imports map[string][]string // storekit's and every other package's direct imports
		want    []string            // substrings of the violations, one each
	}{
		{"allowed", map[string][]string{
			storekit:                       {"context", "hxd/internal/runtime/rtstore", "hxd/migrations"},
			"hxd/internal/runtime/rtstore": {"hxd/internal/journal", "errors"},
			"hxd/internal/journal":         {"fmt"},
		}, nil},
		{"the runtime", map[string][]string{
			storekit:               {"hxd/internal/runtime"},
			"hxd/internal/runtime": {"hxd/internal/runtime/rtstore"},
		}, []string{"depends on hxd/internal/runtime; of this module it may use only"}},
		{"a driver through rtstore", map[string][]string{
			storekit:                       {"hxd/internal/runtime/rtstore"},
			"hxd/internal/runtime/rtstore": {"github.com/jackc/pgx/v5"},
			"github.com/jackc/pgx/v5":      {"database/sql/driver"},
		}, []string{
			"depends on github.com/jackc/pgx/v5 (forbidden: github.com/jackc/pgx/...",
			"depends on database/sql/driver (forbidden: database/sql/driver",
			"depends on github.com/jackc/pgx/v5 outside the standard library",
		}},
		{"another store", map[string][]string{
			storekit:                    {"hxd/internal/store/sqlite"},
			"hxd/internal/store/sqlite": {"modernc.org/sqlite"},
		}, []string{
			"depends on hxd/internal/store/sqlite; of this module it may use only",
			"depends on modernc.org/sqlite (forbidden",
			"depends on modernc.org/sqlite outside the standard library",
		}},
		{"a third-party library", map[string][]string{
			storekit: {"github.com/google/uuid"},
		}, []string{"depends on github.com/google/uuid outside the standard library"}},
		{"database/sql is not a driver", map[string][]string{
			storekit: {"database/sql"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := &depsGraph{imports: tt.imports, std: make(map[string]bool)}
			for _, p := range std {
				g.std[p] = true
			}
			// Deps: everything reachable from storekit.
			var deps []string
			seen := map[string]bool{storekit: true}
			queue := []string{storekit}
			for len(queue) > 0 {
				cur := queue[0]
				queue = queue[1:]
				for _, next := range tt.imports[cur] {
					if !seen[next] {
						seen[next] = true
						deps = append(deps, next)
						queue = append(queue, next)
					}
				}
			}
			got := g.violations(rule, &depsPackage{ImportPath: storekit, Imports: tt.imports[storekit], Deps: deps})
			if len(got) != len(tt.want) {
				t.Fatalf("got %d violation(s), want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, w) }) {
					t.Errorf("no violation says %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

// TestDepsMatch pins the pattern semantics the rules rely on.
func TestDepsMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string
		pattern string
		want    bool
	}{
		{name: "exact", path: "hxd/internal/http", pattern: "hxd/internal/http", want: true},
		{name: "exact is not a prefix", path: "hxd/internal/http/api", pattern: "hxd/internal/http", want: false},
		{name: "tree includes root", path: "hxd/internal/http", pattern: "hxd/internal/http/...", want: true},
		{name: "tree includes children", path: "hxd/internal/http/api", pattern: "hxd/internal/http/...", want: true},
		{name: "tree respects path elements", path: "hxd/internal/httpx", pattern: "hxd/internal/http/...", want: false},
		{name: "module major version", path: "github.com/jackc/pgx/v5/pgconn", pattern: "github.com/jackc/pgx/...", want: true},
		{name: "whole module", path: "hxd/cmd/hxd", pattern: "hxd/...", want: true},
		{name: "std lookalike", path: "net/http/httptrace", pattern: "net/http/...", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := depsMatch(tt.path, tt.pattern); got != tt.want {
				t.Errorf("depsMatch(%q, %q) = %v, want %v", tt.path, tt.pattern, got, tt.want)
			}
		})
	}
}

// depsPackage is the part of `go list -json` output the rules use.
type depsPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

// depsGraph is the non-test import graph of the module and its dependencies.
type depsGraph struct {
	// ours are the module's packages, in `go list` order.
	ours []*depsPackage
	// imports maps every package in the graph to its direct imports.
	imports map[string][]string
	// std holds the graph's standard library packages.
	std map[string]bool
}

// violations lists how pkg breaks rule, one line per forbidden pattern
// (and per kind of onlyOurs and stdOnly breach), each with the shortest
// import chain to an offending package.
func (g *depsGraph) violations(rule depsRule, pkg *depsPackage) []string {
	deps := pkg.Deps
	if rule.direct {
		deps = pkg.Imports
	}
	var out []string
	for _, pattern := range rule.forbid {
		if chain, n := g.shortest(pkg.ImportPath, deps, []string{pattern}, nil); n > 0 {
			out = append(out, fmt.Sprintf("%s depends on %s (forbidden: %s; %d such package(s))\n\tvia %s",
				pkg.ImportPath, chain[len(chain)-1], pattern, n, strings.Join(chain, " -> ")))
		}
	}
	if rule.onlyOurs != nil {
		if chain, n := g.shortest(pkg.ImportPath, deps, []string{depsModule + "/..."}, rule.onlyOurs); n > 0 {
			out = append(out, fmt.Sprintf("%s depends on %s; of this module it may use only %s (%d offending package(s))\n\tvia %s",
				pkg.ImportPath, chain[len(chain)-1], strings.Join(rule.onlyOurs, ", "), n, strings.Join(chain, " -> ")))
		}
	}
	if rule.stdOnly {
		outside := func(dep string) bool { return !g.std[dep] && !depsOurs(dep) }
		if chain, n := g.shortestFunc(pkg.ImportPath, deps, outside); n > 0 {
			out = append(out, fmt.Sprintf("%s depends on %s outside the standard library (%d such package(s))\n\tvia %s",
				pkg.ImportPath, chain[len(chain)-1], n, strings.Join(chain, " -> ")))
		}
	}
	return out
}

// depsLoad lists every package of the module with its dependencies. A
// package that does not build is still listed (-e) and logged: build errors
// are the compiler's business, not this test's.
func depsLoad(t *testing.T) *depsGraph {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-deps", "-json=ImportPath,Standard,Imports,Deps,Error", depsModule+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := &depsGraph{imports: make(map[string][]string), std: make(map[string]bool)}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p depsPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		g.imports[p.ImportPath] = p.Imports
		if p.Standard {
			g.std[p.ImportPath] = true
		}
		if !depsOurs(p.ImportPath) {
			continue
		}
		if p.Error != nil {
			t.Logf("note: %s does not load, its dependency list may be incomplete: %s", p.ImportPath, p.Error.Err)
		}
		g.ours = append(g.ours, &p)
	}
	if len(g.ours) == 0 {
		t.Fatalf("go list found no package of module %s", depsModule)
	}
	return g
}

// shortest returns the shortest import chain from a package to one of deps
// that matches a pattern of match and none of skip, with the number of such
// deps; n is 0 when there is none.
func (g *depsGraph) shortest(from string, deps, match, skip []string) (chain []string, n int) {
	return g.shortestFunc(from, deps, func(dep string) bool {
		return depsMatchAny(dep, match) && !depsMatchAny(dep, skip)
	})
}

// shortestFunc is shortest to the deps for which target is true.
func (g *depsGraph) shortestFunc(from string, deps []string, target func(string) bool) (chain []string, n int) {
	targets := make(map[string]bool)
	for _, dep := range deps {
		if target(dep) {
			targets[dep] = true
		}
	}
	if len(targets) == 0 {
		return nil, 0
	}
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if targets[cur] {
			for p := cur; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain, len(targets)
		}
		for _, next := range g.imports[cur] {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	// Not reachable through the listed imports (a package that does not
	// load): name one target anyway.
	for _, dep := range deps {
		if targets[dep] {
			return []string{from, "…", dep}, len(targets)
		}
	}
	return nil, 0
}

// depsOurs reports whether path is a package of this module.
func depsOurs(path string) bool { return depsMatch(path, depsModule+"/...") }

func depsMatchAny(path string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return depsMatch(path, p) })
}

// depsMatch reports whether an import path matches a pattern: "a/b" matches
// only a/b; "a/b/..." matches a/b and every path below it.
func depsMatch(path, pattern string) bool {
	root, tree := strings.CutSuffix(pattern, "/...")
	if !tree {
		return path == pattern
	}
	return path == root || strings.HasPrefix(path, root+"/")
}
