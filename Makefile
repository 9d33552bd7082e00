# Strata — developer entry points. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo
# Build outputs live outside the clone when STRATA_CACHE is set (CI does), so
# a fresh clone reuses the previous build.
ifdef STRATA_CACHE
export CARGO_TARGET_DIR ?= $(STRATA_CACHE)/target
endif

.PHONY: help deps build run test lint fmt bench crds clean

help: ## List targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

deps: ## Install what a fresh Debian machine lacks (redis-server/redis-tools for differential tests)
	@./scripts/install-deps.sh

build: ## Build release binaries
	$(CARGO) build --release --workspace

run: ## Run the node alone (127.0.0.1:6379, data dir ./data, metrics on :9121)
	$(CARGO) run --release -p strata-node -- $(ARGS)

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format the code
	$(CARGO) fmt --all

test: deps lint ## Every test: lint, unit, integration, differential against redis-server
	$(CARGO) test --workspace --no-fail-fast

bench: ## Benchmarks side by side with redis-server (see bench/README.md)
	./bench/redis-benchmark.sh $(ARGS)

crds: ## Regenerate crds/ from the operator's Rust types
	$(CARGO) run -q -p strata-operator --bin crdgen > crds/strata.dev_cacheclusters.yaml

clean:
	$(CARGO) clean
