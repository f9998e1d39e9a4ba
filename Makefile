# Partner Workspace API. The two commands a new user needs:
#   make run    install what is missing, then serve on an embedded PostgreSQL
#   make test   install what is missing, then run every check and test
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
TOOL     := $(GO) tool -modfile=tools/go.mod
BUF      := $(TOOL) buf
SQLC     := $(TOOL) sqlc
GATEWAY  := github.com/grpc-ecosystem/grpc-gateway@v1.16.0
BIN      := bin/partnerapi
# VERSION is what `partnerapi version` prints: the tag, or the commit.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install what is missing: Go modules, tools, PostgreSQL server binaries
	@command -v $(GO) >/dev/null || { echo "Go 1.26+ is required: https://go.dev/dl/" >&2; exit 1; }
	@./scripts/install-deps.sh
	$(GO) mod download
	$(GO) mod download -modfile=tools/go.mod
	cd clients/go && $(GO) mod download

# The TypeScript client's tools (protoc-gen-es, tsc) come from its lock file.
TS := clients/ts
$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json $(TS)/package.json
	@command -v npm >/dev/null || { echo "Node.js 20+ and npm are required for clients/ts (apt-get install nodejs npm)" >&2; exit 1; }
	cd $(TS) && npm ci --no-audit --no-fund

.PHONY: npm
npm: $(TS)/node_modules/.package-lock.json ## install the TypeScript client's packages (npm ci)

# third_party/googleapis holds google/api/{annotations,http,httpbody}.proto
# (from the github.com/grpc-ecosystem/grpc-gateway@v1.16.0 Go module) and
# google/rpc/{code,status,error_details}.proto (from the google-proto-files
# npm package in clients/ts: the Go module's copy predates ErrorInfo), with
# their LICENSE. The Buf Schema Registry is unreachable. They are committed,
# so `buf lint` and `buf build` work on a fresh clone; `make googleapis`
# copies them again, and check-generate fails if they were edited.
GOOGLEAPIS := third_party/googleapis

.PHONY: googleapis
googleapis: npm ## copy the google/api and google/rpc protos from the Go module and npm caches
	@dir=$$($(GO) mod download -json $(GATEWAY) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$dir" || { echo "cannot download $(GATEWAY)" >&2; exit 1; }; \
	  mkdir -p $(GOOGLEAPIS)/google/api $(GOOGLEAPIS)/google/rpc; \
	  cp "$$dir"/third_party/googleapis/google/api/{annotations,http,httpbody}.proto $(GOOGLEAPIS)/google/api/; \
	  cp "$$dir"/third_party/googleapis/LICENSE $(GOOGLEAPIS)/LICENSE; \
	  cp $(TS)/node_modules/google-proto-files/google/rpc/{code,status,error_details}.proto $(GOOGLEAPIS)/google/rpc/; \
	  chmod -R u+w $(GOOGLEAPIS)

# buf writes the Go code, the TypeScript code and the generator's OpenAPI
# document (build/openapi); openapigen completes the document from the
# method options into gen/openapi (see cmd/openapigen).
.PHONY: generate
generate: googleapis ## regenerate gen/, clients/ts/src/gen, clients/go/gen (buf), gen/openapi and db/dbsqlc (sqlc)
	$(BUF) generate
	$(BUF) generate --template $(TS)/buf.gen.yaml
	$(BUF) generate --template clients/go/buf.gen.yaml
	$(GO) run ./cmd/openapigen build/openapi/openapi.json gen/openapi
	$(SQLC) generate

GENERATED := gen db/dbsqlc $(TS)/src/gen clients/go/gen $(GOOGLEAPIS)

.PHONY: check-generate
check-generate: generate ## fail when committed generated code is stale
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
	  echo "generated code is stale; run 'make generate' and commit:" >&2; \
	  git status --porcelain -- $(GENERATED) >&2; \
	  git --no-pager diff --stat -- $(GENERATED) >&2; \
	  exit 1; \
	fi

# db/migrations.sum holds the SHA-256 of every migration: a landed one is
# never edited, renamed or removed (goose never applies a version twice, so
# an edit would leave older databases silently different). migrations-sum
# adds new files and refuses to change a committed entry; check-migrations
# fails when a file differs from the sum, or the sum from its git history
# (see db/migrationsum).
MIGRATIONSUM := $(GO) run ./db/migrationsum/migrationsum

.PHONY: migrations-sum
migrations-sum: ## write db/migrations.sum after adding a migration (never to accept an edit of a landed one)
	$(MIGRATIONSUM) write

.PHONY: check-migrations
check-migrations: ## fail when a migration differs from db/migrations.sum, or the sum from its committed versions
	$(MIGRATIONSUM) check

# The SQL linters (scripts/lint-sql.sh): squawk from tools/sqllint's lock
# file, plpgsql_check from Debian (scripts/install-deps.sh, make deps).
SQLLINT := tools/sqllint
$(SQLLINT)/node_modules/.package-lock.json: $(SQLLINT)/package-lock.json $(SQLLINT)/package.json
	@command -v npm >/dev/null || { echo "Node.js 20+ and npm are required for tools/sqllint (apt-get install nodejs npm)" >&2; exit 1; }
	cd $(SQLLINT) && npm ci --no-audit --no-fund

# The Prometheus alert rules operators load (docs/prometheus/alerts.yml);
# promtool comes from Debian's prometheus package (scripts/install-deps.sh).
# TestDashboardAndAlertsNameExportedSeries (service/server) checks that
# they and the Grafana dashboard query only series the server exports.
.PHONY: check-alerts
check-alerts: ## promtool check rules on docs/prometheus/alerts.yml
	@command -v promtool >/dev/null || { echo "promtool is required: run scripts/install-deps.sh" >&2; exit 1; }
	promtool check rules docs/prometheus/alerts.yml

.PHONY: lint
lint: check-migrations check-alerts $(SQLLINT)/node_modules/.package-lock.json ## check-migrations, check-alerts, gofmt, go vet, staticcheck, go mod tidy, buf lint, buf format, buf breaking against main, squawk on new migrations, plpgsql_check on every function
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(TOOL) staticcheck ./...
	$(GO) mod tidy -diff
	$(BUF) lint
	$(BUF) format proto -d --exit-code
	./scripts/buf-breaking.sh $(BUF)
	GO=$(GO) ./scripts/lint-sql.sh

.PHONY: test
test: deps lint check-generate ## every check and test (what CI runs)
	$(GO) test -race -count=1 ./...
	@$(MAKE) --no-print-directory test-ts
	@$(MAKE) --no-print-directory test-openapi

# test-ts runs clients/ts/test/*.test.js (test/server.js is their helper,
# not a test) against the real server; package.test.js packs the package
# and installs it with the newest peer versions into a fresh app, so it
# needs the npm registry.
.PHONY: test-ts
test-ts: npm build ## the TypeScript client against the real server (node --test)
	cd $(TS) && npm run --silent build && PARTNERAPI_BIN=$(CURDIR)/$(BIN) node --test test/*.test.js

# test-openapi checks gen/openapi/openapi.json with the tools a partner
# would use (clients/openapi-check, its own lock file): Redocly CLI lint
# with the recommended rules (no error, no warning), openapi-typescript
# types compiled with an openapi-fetch paging program under tsc --strict,
# and that program run against the real server; then the same for a
# workspace's own document (GET /openapi.json with a token) with custom
# fields defined through psql on the server's database (test/workspace.test.js).
OPENAPI_CHECK := clients/openapi-check
$(OPENAPI_CHECK)/node_modules/.package-lock.json: $(OPENAPI_CHECK)/package-lock.json $(OPENAPI_CHECK)/package.json
	@command -v npm >/dev/null || { echo "Node.js 20+ and npm are required for clients/openapi-check (apt-get install nodejs npm)" >&2; exit 1; }
	cd $(OPENAPI_CHECK) && npm ci --no-audit --no-fund

.PHONY: test-openapi
test-openapi: $(OPENAPI_CHECK)/node_modules/.package-lock.json build ## lint the OpenAPI document; compile and run a typed client of it (node --test)
	cd $(OPENAPI_CHECK) && PARTNERAPI_BIN=$(CURDIR)/$(BIN) node --test test/*.test.js

.PHONY: build
build: ## build bin/partnerapi
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/partnerapi

# bin/buf is the pinned buf (tools/go.mod) for `./bin/buf curl`, which
# docs/api.md uses: the same build `go tool` runs, linked into ./bin.
bin/buf: tools/go.mod tools/go.sum
	$(GO) build -modfile=tools/go.mod -o bin/buf github.com/bufbuild/buf/cmd/buf

.PHONY: run
run: deps build ## serve on :8080 (admin on 127.0.0.1:8081) with an embedded PostgreSQL in ./.data
	exec ./$(BIN) serve

.PHONY: bench
bench: deps build ## load benchmarks against same-run baselines (see docs/performance.md)
	$(GO) run ./cmd/partnerbench

.PHONY: bench-scale
bench-scale: deps build ## how cost grows with data: 10k-1M contacts, 1k-1M tokens; writes docs/scale.csv and docs/scale.png
	$(GO) run ./cmd/partnerbench scale -csv docs/scale.csv -png docs/scale.png

.PHONY: fault
fault: deps build ## fault injection under load: database crash, freeze, SIGTERM (see docs/operations.md)
	$(GO) run ./cmd/partnerfault

.PHONY: test-upgrade
test-upgrade: deps build ## rolling upgrade from PREVIOUS_RELEASE and rollback under load: fails on any 5xx or lost write (see docs/operations.md)
	$(GO) run ./cmd/partnerupgrade

.PHONY: test-ha
test-ha: deps build ## failovers of a Patroni cluster under load: switchover, crash, freeze, partition (see docs/operations.md)
	./scripts/install-ha-deps.sh
	$(GO) run ./cmd/partnerha

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 5m)
	@for t in $$(grep -rhoE 'func Fuzz[A-Za-z0-9_]+' --include='*_test.go' internal service | sed 's/func //'); do \
	  pkg=$$(grep -rlE "func $$t\(" --include='*_test.go' internal service | xargs dirname | head -1); \
	  echo "== $$t ($$pkg)"; $(GO) test ./$$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-5m}; \
	done
