# Halley — see README.md. `make run` starts Halley on the embedded default; `make test` runs the tests.
GO        ?= go
BIN       := bin/halley
PKG       := ./server/cmd/halley
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
HAS_NPM   := $(shell command -v npm >/dev/null 2>&1 && echo yes)
# golangci-lint, pinned in a module of its own so that its dependencies stay out of go.mod; built on first use.
GOLANGCI  := $(GO) tool -modfile=tools/golangci-lint/go.mod golangci-lint
UI_SRC    := $(shell find frontend/src frontend/public frontend/scripts frontend/index.html frontend/package.json frontend/package-lock.json frontend/vite.config.ts model/definition.schema.json -type f 2>/dev/null)

.PHONY: run build ui ui-deps generate test test-go test-ui lint lint-go lint-ui bench faults soak templates clean

## run: build (UI included when npm is available) and start Halley with the embedded SQLite default
run: build
	./$(BIN) serve

## build: the halley binary, with the web UI embedded
build: ui
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) $(PKG)

## ui: build the web UI into frontend/dist when it is missing or older than its sources
ui: frontend/dist/index.html

frontend/dist/index.html: $(UI_SRC)
ifeq ($(wildcard frontend/package.json),)
	@echo "ui: no frontend/package.json yet; serving the API only"
else ifeq ($(HAS_NPM),yes)
	$(MAKE) ui-deps
	cd frontend && npm run build
else
	@echo "ui: npm not found; building Halley without its web UI (install Node.js 20.19+ to include it)"
endif

# ui-deps: the front end's node_modules, installed when missing or older than package-lock.json
ui-deps:
	cd frontend && { [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund; }

## generate: regenerate what the Go definition types in model/ generate: model/definition.schema.json, the field
## reference of docs/templates.md, and the front end's types (frontend/src/generated/definition.ts); commit them
generate:
	$(GO) run ./service/graph/schemagen
	@if [ "$(HAS_NPM)" = yes ]; then $(MAKE) ui-deps && cd frontend && npm run generate; \
	else echo "generate: npm not found; frontend/src/generated/definition.ts not regenerated"; exit 1; fi

## test: every test (Go on SQLite always, on MySQL/Redis/a Redis Cluster when HALLEY_TEST_MYSQL/HALLEY_TEST_REDIS/
## HALLEY_TEST_REDIS_CLUSTER are set — scripts/redis-cluster.sh start prints the last; UI tests)
test: test-go test-ui

test-go:
	$(GO) test -count=1 -timeout 15m ./...

## test-ui: a check that the front end's generated types match the schema, the UI's unit tests (Vitest) and its
## end-to-end test in Chromium against a real Halley
test-ui:
ifneq ($(wildcard frontend/package.json),)
	@if [ "$(HAS_NPM)" = yes ]; then \
		$(MAKE) ui-deps && (cd frontend && npm run check:generated) && \
		$(MAKE) build && \
		cd frontend && npm run test:unit && HALLEY_BIN=$(CURDIR)/$(BIN) npm run test:e2e; \
	elif [ "$$CI" = true ]; then echo "test-ui: npm is required under CI=true"; exit 1; \
	else echo "test-ui: npm not found; skipping UI tests"; fi
endif

## lint: go vet, a gofmt check and golangci-lint (.golangci.yml) on the Go code; ESLint on the front end
## (frontend/eslint.config.js). Every exception in either names its reason.
lint: lint-go lint-ui

lint-go:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI) run ./...

lint-ui:
ifneq ($(wildcard frontend/package.json),)
	@if [ "$(HAS_NPM)" = yes ]; then \
		$(MAKE) ui-deps && cd frontend && npm run lint; \
	elif [ "$$CI" = true ]; then echo "lint-ui: npm is required under CI=true"; exit 1; \
	else echo "lint-ui: npm not found; skipping ESLint"; fi
endif

## templates: load the ready-made templates into a running Halley (URL, user, password: see halley templates load -h)
templates: build
	./$(BIN) templates load $(ARGS)

clean:
	rm -rf bin frontend/node_modules
	find frontend/dist -mindepth 1 ! -name .gitkeep -delete 2>/dev/null || true

## bench: build halley and halley-bench, start Halley on a fresh MySQL database and Redis on a free loopback
## port, run the benchmark suites (steps, timers, storm, plugins) and stop it; knobs in scripts/bench.sh
## (≈ 45 min at the issue's sizes, 1,000,000 timers; BENCH_QUICK=1 make bench ≈ 10 min); docs/benchmarks.md
bench:
	./scripts/bench.sh

## faults: the fault tests (kill -9 under load, Redis FLUSHALL and restart, a Redis Cluster master restart, MySQL
## restart) with real halley, redis-server and mariadbd processes on loopback ports; needs HALLEY_TEST_MYSQL (see docs/faults.md)
faults:
	HALLEY_FAULTS=1 $(GO) test -count=1 -timeout 10m -parallel 3 -v -run '^TestFault' ./server/cmd/halley

## soak: not in CI — start the real halley binary, drive a steady mixed load (starts, reads, approvals, delay
## timers) for HALLEY_SOAK_DURATION (10m) and fail unless goroutines and RSS stay flat; HALLEY_SOAK_DB=mysql
## runs it on HALLEY_TEST_MYSQL; see docs/faults.md
soak:
	HALLEY_SOAK=1 $(GO) test -count=1 -timeout 3h -run '^TestSoak$$' -v ./server/cmd/halley
