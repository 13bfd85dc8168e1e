# hxd — developer entry points. `make help` lists the targets.
#
# Every target is a plain `go` (or git/docker) command that works on a fresh
# machine with Go installed; CI (.ci/run) calls these same targets. GOFLAGS
# from the environment is honoured (e.g. GOFLAGS=-mod=readonly, the default
# anyway); nothing here needs the network except module downloads.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go

# VERSION is stamped into the binary (main.version) and the image tag.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# `make run`: listen address and SQLite database file.
RUN_ADDR ?= 127.0.0.1:8080
RUN_DB ?= ./hxd.db

# `make test`: per-package timeouts (a hung test fails instead of hanging CI)
# and the packages the race detector covers (the durable state machine; set
# RACE_PKGS=./... for everything).
TEST_TIMEOUT ?= 10m
RACE_TIMEOUT ?= 15m
RACE_PKGS ?= ./internal/runtime/...

# `make bench` and `make fuzz`.
BENCHTIME ?= 1s
FUZZTIME ?= 10s

# `make docker`.
IMAGE ?= hxd

# The generated TypeScript client (npm package @hxd/client); its npm
# dependencies are (re)installed with `npm ci` when the lockfile changes.
TS_CLIENT ?= clients/typescript
TS_DEPS = $(TS_CLIENT)/node_modules/.package-lock.json

# Every Go file of the module's packages, tests and build-tag-excluded files
# included (testdata and other directories the go command skips are not).
GO_FILES = $(GO) list -e -f '{{$$d := .Dir}}{{range .GoFiles}}{{$$d}}/{{.}} {{end}}{{range .CgoFiles}}{{$$d}}/{{.}} {{end}}{{range .TestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$d}}/{{.}} {{end}}{{range .IgnoredGoFiles}}{{$$d}}/{{.}} {{end}}' ./...

.PHONY: help
help: ## list targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## start `hxd serve --demo` on 127.0.0.1:8080 with SQLite ./hxd.db (RUN_ADDR, RUN_DB)
	$(GO) run ./cmd/hxd serve --demo --addr $(RUN_ADDR) --db $(RUN_DB)

.PHONY: build
build: ## build bin/hxd (-trimpath, main.version=VERSION)
	$(GO) build -trimpath -ldflags '-X main.version=$(VERSION)' -o bin/hxd ./cmd/hxd

# The race detector needs cgo (a C compiler): outside CI, a machine without
# one still runs the suite and gets a warning instead of test/race; CI insists.
.PHONY: test
test: ## run the whole suite, then test/ts and test/race
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@$(MAKE) --no-print-directory test/ts
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ] || [ -n "$${CI:-}" ]; then \
		$(MAKE) --no-print-directory test/race; \
	else \
		echo "warning: test/race skipped: the race detector needs cgo and a C compiler (go env CGO_ENABLED is 0)" >&2; \
	fi

# The Temporal engine's end-to-end tests run against a real Temporal dev
# server, Redis (HXD_TEST_REDIS_ADDR, default 127.0.0.1:6379) and an
# S3-compatible server (versitygw): the pinned Temporal CLI and versitygw are
# built once per machine into ~/.cache/hxd (minutes cold), so `make test`
# skips these tests and this target runs them (HXD_TEST_TEMPORAL=1).
.PHONY: test-temporal
test-temporal: ## Temporal engine end-to-end tests: real Temporal dev server, Redis and S3 (builds the pinned CLIs once)
	@bash scripts/build-temporal.sh >/dev/null
	@bash scripts/build-versitygw.sh >/dev/null
	HXD_TEST_TEMPORAL=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'Temporal' ./cmd/hxd/
	HXD_TEST_TEMPORAL=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestServer' ./internal/temporal/

.PHONY: test/race
test/race: ## race-detector tests of RACE_PKGS (default ./internal/runtime/...)
	$(GO) test -race -count=1 -timeout $(RACE_TIMEOUT) $(RACE_PKGS)

# The clients' tests run against this hxd binary, built once per target.
CLIENT_TEST_HXD = bin/client-test/hxd

.PHONY: test/ts
test/ts: $(TS_DEPS) ## TypeScript client (clients/typescript): build, node --test against a real hxd, npm pack + install
	$(GO) build -o $(CLIENT_TEST_HXD) ./cmd/hxd
	cd $(TS_CLIENT) && npm run --silent build && HXD_BIN=$(CURDIR)/$(CLIENT_TEST_HXD) npm test --silent

$(TS_DEPS): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	cd $(TS_CLIENT) && npm ci --silent --no-audit --no-fund

.PHONY: generate
generate: $(TS_DEPS) ## regenerate internal/http/api and the TypeScript client's schema from api/openapi.yaml
	$(GO) generate ./internal/http/api/...
	cd $(TS_CLIENT) && npm run --silent generate

.PHONY: verify
verify: generate lint lint/contract ## regenerate and fail on stale generated code; vet; gofmt check; contract lint
	@git diff --exit-code --stat -- internal/http/api $(TS_CLIENT)/src/schema.ts || { \
		echo 'generated code is stale: run `make generate` and commit the result' >&2; exit 1; }
	@untracked="$$(git ls-files --others --exclude-standard -- internal/http/api $(TS_CLIENT)/src/schema.ts)"; \
	if [ -n "$$untracked" ]; then \
		echo "generated files not committed (git add them):" >&2; echo "$$untracked" >&2; exit 1; fi

.PHONY: lint
lint: vet fmt/check ## go vet + gofmt check

.PHONY: lint/contract
lint/contract: $(TS_DEPS) ## lint api/openapi.yaml with Redocly CLI (rules: api/redocly.yaml)
	cd $(TS_CLIENT) && npm run --silent lint:contract

.PHONY: vet
vet: ## go vet ./...
	$(GO) vet ./...

.PHONY: fmt
fmt: ## gofmt -w every Go file of the module
	@gofmt -l -w $$($(GO_FILES))

.PHONY: fmt/check
fmt/check: ## fail if a Go file is not gofmt-formatted
	@out="$$(gofmt -l $$($(GO_FILES)) | sed 's|^$(CURDIR)/||')"; \
	if [ -n "$$out" ]; then echo "not gofmt-formatted (run make fmt):" >&2; echo "$$out" >&2; exit 1; fi

.PHONY: bench
# -p 1: one package's benchmarks at a time, so that their ratios against
# baselines measured in the same run are not skewed by another package's.
bench: ## run every benchmark (-benchtime BENCHTIME, default 1s), results to stdout; includes the Temporal engine's (see test-temporal)
	HXD_TEST_TEMPORAL=1 $(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count=1 ./...

.PHONY: fuzz
fuzz: ## run every Fuzz target for FUZZTIME (default 10s) each
	@n=0; \
	for pkg in $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do \
		list="$$($(GO) test -list '^Fuzz' "$$pkg")"; \
		for target in $$(grep '^Fuzz' <<<"$$list" || true); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
			n=$$((n + 1)); \
		done; \
	done; \
	echo "fuzz: $$n target(s) run"

.PHONY: docker
docker: ## docker build the image IMAGE:VERSION (default hxd:<git describe>)
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .

.PHONY: clean
clean: ## remove build output (bin/); never touches hxd.db
	rm -rf bin
