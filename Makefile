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

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install what is missing: Go modules, tools, PostgreSQL server binaries
	@command -v $(GO) >/dev/null || { echo "Go 1.26+ is required: https://go.dev/dl/" >&2; exit 1; }
	@./scripts/install-deps.sh
	$(GO) mod download
	$(GO) mod download -modfile=tools/go.mod

# build/googleapis holds google/api/{annotations,http,httpbody}.proto, copied
# from a Go module the module proxy serves, because the Buf Schema Registry
# is unreachable. The directory is ignored by git and rebuilt on demand.
build/googleapis/google/api/annotations.proto:
	@dir=$$($(GO) mod download -json $(GATEWAY) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -n "$$dir" || { echo "cannot download $(GATEWAY)" >&2; exit 1; }; \
	  mkdir -p build/googleapis/google/api; \
	  cp "$$dir"/third_party/googleapis/google/api/{annotations,http,httpbody}.proto build/googleapis/google/api/; \
	  cp "$$dir"/third_party/googleapis/LICENSE build/googleapis/LICENSE; \
	  chmod -R u+w build/googleapis

.PHONY: googleapis
googleapis: build/googleapis/google/api/annotations.proto ## materialise google/api protos offline

.PHONY: generate
generate: googleapis ## regenerate gen/ (buf) and db/dbsqlc (sqlc)
	$(BUF) generate
	$(SQLC) generate

.PHONY: check-generate
check-generate: generate ## fail when committed generated code is stale
	@if [ -n "$$(git status --porcelain -- gen db/dbsqlc)" ]; then \
	  echo "generated code is stale; run 'make generate' and commit:" >&2; \
	  git status --porcelain -- gen db/dbsqlc >&2; \
	  git --no-pager diff --stat -- gen db/dbsqlc >&2; \
	  exit 1; \
	fi

.PHONY: lint
lint: googleapis ## go vet, buf lint, buf format
	$(GO) vet ./...
	$(BUF) lint
	$(BUF) format proto -d --exit-code

.PHONY: test
test: deps lint check-generate ## every check and test (what CI runs)
	$(GO) test -race -count=1 ./...

.PHONY: build
build: ## build bin/partnerapi
	$(GO) build -o $(BIN) ./cmd/partnerapi

.PHONY: run
run: deps build ## serve on :8080 (admin on 127.0.0.1:8081) with an embedded PostgreSQL in ./.data
	exec ./$(BIN) serve

.PHONY: bench
bench: deps build ## load benchmarks against same-run baselines (see docs/performance.md)
	$(GO) run ./cmd/partnerbench

.PHONY: fault
fault: deps build ## fault injection under load: database crash, freeze, SIGTERM (see docs/operations.md)
	$(GO) run ./cmd/partnerfault

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 5m)
	@for t in $$(grep -rhoE 'func Fuzz[A-Za-z0-9_]+' --include='*_test.go' internal | sed 's/func //'); do \
	  pkg=$$(grep -rlE "func $$t\(" --include='*_test.go' internal | xargs dirname | head -1); \
	  echo "== $$t ($$pkg)"; $(GO) test ./$$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-5m}; \
	done
