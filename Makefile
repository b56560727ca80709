# dra-e2e developer targets. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo
ARGS ?=
BENCH_FLAGS ?=

.PHONY: help build test fmt lint controlplane bench e2e-local e2e kind-up kind-down check-features ci

help: ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build the runner
	$(CARGO) build

controlplane: ## build etcd + kube-apiserver/scheduler/controller-manager into the cache (prints the dir)
	hack/build-controlplane.sh

test: controlplane ## run every test (unit, integration, end-to-end on the local cluster)
	DRA_E2E_BINARIES_DIR=$$(hack/build-controlplane.sh) $(CARGO) test -- --test-threads=2

bench: controlplane ## benchmarks (local cluster start-up); BENCH_FLAGS=--profile=dev skips the optimised build
	DRA_E2E_BINARIES_DIR=$$(hack/build-controlplane.sh) $(CARGO) bench $(BENCH_FLAGS) --bench local_cluster_startup

fmt: ## format the code
	$(CARGO) fmt

lint: ## formatting and clippy, warnings are errors
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

ci: ## what CI runs
	.ci/run
