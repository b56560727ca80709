# dra-e2e developer targets. `make help` lists them.
SHELL := /bin/bash
CARGO ?= cargo
ARGS ?=
KIND ?= kind
KIND_CLUSTER ?= dra-e2e
PROXY_IMAGE ?= registry.k8s.io/sig-storage/hostpathplugin:v1.17.1
BINARIES = $$(hack/build-controlplane.sh)
NODE_BINARIES = $$(hack/build-node.sh)
BENCH_FLAGS ?=
# Real nodes of `make e2e-real` and `make bench`: two for the scenarios that
# share nodes, four for the @OwnNodes ones (node operations) to run beside
# them (docs/tags.md).
REAL_NODES ?= 6
# The Kubernetes version everything is built at.
KUBE_VERSION := $(shell sed -n 's/^KUBE_VERSION=//p' hack/versions.env)
# Upstream's DRA test driver image, as deploy/dra-test-driver/kubelet-plugin.yaml
# names it (tests/test_driver_manifests.rs holds the two together); imported
# from its archive by real nodes, never pulled.
TEST_DRIVER_IMAGE = localhost/dra-e2e/dra-test-driver:$(KUBE_VERSION)
TEST_DRIVER_DIR = target/dra-test-driver
# Upstream's e2e.test on real nodes: ginkgo focus and skip (empty UPSTREAM_SKIP
# keeps the script's default), parallel processes.
UPSTREAM_FOCUS ?= \[DRA\]
UPSTREAM_SKIP ?=
UPSTREAM_PROCS ?= 4
UPSTREAM_CI_FOCUS ?= \[DRA\] kubelet \[Feature:DynamicResourceAllocation\] on single node

.PHONY: e2e-skew e2e-kube-version help build test test-fast test-tools fmt lint controlplane node test-driver rolling-driver bench soak e2e-local e2e-real e2e kind-up kind-down check ci docs upstream-table steps-doc cli-doc upstream-e2e-real upstream-e2e-real-ci conformance conformance-simulated conformance-real interposer-real interposer-simulated

help: ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build the runner and dra-e2e-agent (every crate of the workspace)
	$(CARGO) build

controlplane: ## build etcd + kube-apiserver/scheduler/controller-manager into the cache (prints the dir)
	hack/build-controlplane.sh

node: ## build kubelet + containerd for real nodes into the cache, install runc, CNI plugins, busybox, iptables (prints the dir)
	hack/build-node.sh

test-driver: ## upstream's DRA test driver for real nodes (profiles/dra-test-driver.yaml): build it (Go, at KUBE_VERSION), write its image archive and manifests into target/dra-test-driver/
	dir=$$(hack/build-test-driver.sh) && \
	  $(CARGO) run --quiet -- image --binary "$$dir/dra-test-driver" --reference $(TEST_DRIVER_IMAGE) --out $(TEST_DRIVER_DIR)/dra-test-driver.oci.tar && \
	  cp "$$dir/dra-test-driver" $(TEST_DRIVER_DIR)/
	cp deploy/dra-test-driver/*.yaml $(TEST_DRIVER_DIR)/
	$(CARGO) run --quiet -- profile check profiles/dra-test-driver.yaml
	$(CARGO) run --quiet -- profile check profiles/dra-test-driver-simulated.yaml

rolling-driver: ## the project's rolling-update DRA driver for real nodes (profiles/rolling-driver.yaml): build it (Go, kubeletplugin helper at KUBE_VERSION), write its image archive and manifests into target/rolling-driver/
	dir=$$(hack/build-rolling-driver.sh) && \
	  $(CARGO) run --quiet -- image --binary "$$dir/rolling-driver" --reference localhost/dra-e2e/rolling-driver:$(KUBE_VERSION) --out target/rolling-driver/rolling-driver.oci.tar
	cp deploy/rolling-driver/*.yaml target/rolling-driver/
	$(CARGO) run --quiet -- profile check profiles/rolling-driver.yaml

test-tools: ## install what the tests use besides the runner (xmllint for the JUnit schema, chromium for the HTML report)
	hack/test-tools.sh

test: controlplane node test-driver rolling-driver test-tools ## run every test (unit, integration, end to end on the local cluster, simulated and real nodes; upstream's test driver for the conformance pack on real nodes, the rolling-update driver behind the interposer)
	DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) $(CARGO) test --features cluster-tests -- --test-threads=2

test-fast: ## the fast tier alone: what needs no root, Go or control plane (plain `cargo test`); says what it left to `make test`
	$(CARGO) test

fmt: ## format the code
	$(CARGO) fmt

lint: ## formatting and clippy, warnings are errors
	$(CARGO) fmt --check
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings

upstream-table: ## regenerate the table of upstream's tests and their scenarios in docs/upstream-tests.md (from features/ and docs/upstream-tests.tsv), no cluster needed
	$(CARGO) run --quiet -- upstream --write docs/upstream-tests.md $(ARGS)

steps-doc: ## regenerate the step catalogue docs/steps.md (from steps/catalogue.rs), no cluster needed
	$(CARGO) run --quiet -- steps --markdown > docs/steps.md.tmp
	mv docs/steps.md.tmp docs/steps.md

cli-doc: ## regenerate docs/cli.md's option reference (from the options table, src/runner/options.rs), no cluster needed
	$(CARGO) run --quiet -- options --write docs/cli.md

docs: upstream-table steps-doc cli-doc ## regenerate the generated documents (docs/upstream-tests.md, docs/steps.md, docs/cli.md's option reference)

check: ## check the feature files (undefined/ambiguous steps, unknown tags), no cluster needed
	$(CARGO) run --quiet -- check features

e2e-local: controlplane ## run the whole suite on the local cluster, JUnit in target/junit.xml
	DRA_E2E_BINARIES_DIR=$(BINARIES) $(CARGO) run -- --cluster local --junit target/junit.xml $(ARGS)

e2e-real: controlplane node ## run the whole suite on the local cluster with REAL_NODES (6) real kubelet nodes (root), JUnit in target/junit-real.xml
	DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) $(CARGO) run -- --cluster local --node-kind real --nodes $(REAL_NODES) --junit target/junit-real.xml --tags @DynamicResourceAllocation $(ARGS)

# Kubelets older than the control plane for e2e-skew (n-1 and n-3 of the
# pinned KUBE_VERSION), and the control plane of e2e-kube-version; a minor
# stands for the release hack/versions.env pins for it.
SKEW_KUBELETS ?= 1.36 1.34
OLD_KUBE ?= 1.35

e2e-skew: ## the suite on two real nodes whose kubelet is older than the control plane (SKEW_KUBELETS, default n-1 and n-3), each kubelet built into the cache on first use; JUnit in target/junit-skew-VERSION.xml (root)
	@rc=0; for v in $(SKEW_KUBELETS); do \
	  echo "== kubelet $$v against the pinned control plane"; \
	  $(CARGO) run -- --cluster local --node-kind real --nodes 2 --kubelet-version $$v --tags @DynamicResourceAllocation --junit target/junit-skew-$$v.xml $(ARGS) || rc=1; \
	done; exit $$rc

e2e-kube-version: ## the suite on a local cluster whose control plane and kubelets are OLD_KUBE (default 1.35), built into the cache on first use (about 20 minutes on 2 cores); JUnit in target/junit-kube-OLD_KUBE.xml (root)
	$(CARGO) run -- --cluster local --node-kind real --nodes 2 --kube-version $(OLD_KUBE) --tags @DynamicResourceAllocation --junit target/junit-kube-$(OLD_KUBE).xml $(ARGS)

conformance: controlplane ## the driver conformance pack (features/conformance) against the suite's own driver on simulated nodes, JUnit in target/junit-conformance.xml
	DRA_E2E_BINARIES_DIR=$(BINARIES) $(CARGO) run -- --cluster local --tags @DriverConformance --junit target/junit-conformance.xml $(ARGS)

conformance-simulated: controlplane test-driver ## the driver conformance pack against upstream's dra-test-driver started per simulated node (profiles/dra-test-driver-simulated.yaml)
	DRA_E2E_BINARIES_DIR=$(BINARIES) $(CARGO) run -- --cluster local --profile profiles/dra-test-driver-simulated.yaml --tags @DriverConformance --junit target/junit-conformance-simulated.xml $(ARGS)

conformance-real: controlplane node test-driver ## the driver conformance pack against upstream's dra-test-driver (profiles/dra-test-driver.yaml) on two real nodes (root), JUnit in target/junit-conformance-real.xml
	DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) $(CARGO) run -- --cluster local --node-kind real --nodes 2 --profile profiles/dra-test-driver.yaml --tags @DriverConformance --junit target/junit-conformance-real.xml --html target/conformance-real.html $(ARGS)

# The drivers `make interposer-real` puts behind the interposer: upstream's
# test driver (plain socket names) and the project's rolling-update driver
# (kubeletplugin.RollingUpdate, a DaemonSet with maxSurge: 1).
INTERPOSER_PROFILES ?= profiles/dra-test-driver.yaml profiles/rolling-driver.yaml

interposer-real: controlplane node test-driver rolling-driver ## the @Interposed scenarios against each of INTERPOSER_PROFILES (upstream's test driver, the rolling-update driver) behind the interposer on two real nodes (root), JUnit in target/junit-interposer-real-NAME.xml
	@rc=0; for p in $(INTERPOSER_PROFILES); do \
	  echo "== interposed: $$p"; \
	  DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) $(CARGO) run -- --cluster local --node-kind real --nodes 2 --profile $$p --interpose --tags @Interposed --junit target/junit-interposer-real-$$(basename $$p .yaml).xml $(ARGS) || rc=1; \
	done; exit $$rc

interposer-simulated: controlplane test-driver ## the same on simulated nodes (no root)
	DRA_E2E_BINARIES_DIR=$(BINARIES) $(CARGO) run -- --cluster local --profile profiles/dra-test-driver-simulated.yaml --interpose --tags @Interposed $(ARGS)

upstream-e2e-real: ## upstream's own e2e.test (built at the control plane's version) on two real nodes, focus UPSTREAM_FOCUS (default [DRA]); prints pass/fail counts (root)
	UPSTREAM_FOCUS='$(UPSTREAM_FOCUS)' $(if $(UPSTREAM_SKIP),UPSTREAM_SKIP='$(UPSTREAM_SKIP)') UPSTREAM_PROCS=$(UPSTREAM_PROCS) hack/upstream-e2e.sh run

upstream-e2e-real-ci: ## upstream-e2e-real with UPSTREAM_CI_FOCUS, a part of [DRA] that fits in 5 minutes
	UPSTREAM_FOCUS='$(UPSTREAM_CI_FOCUS)' $(if $(UPSTREAM_SKIP),UPSTREAM_SKIP='$(UPSTREAM_SKIP)') UPSTREAM_PROCS=$(UPSTREAM_PROCS) hack/upstream-e2e.sh run

e2e: ## run the suite on the kind cluster (make kind-up first)
	mkdir -p target && $(KIND) get kubeconfig --name $(KIND_CLUSTER) > target/kind.kubeconfig
	$(CARGO) run -- --cluster kubeconfig --kubeconfig target/kind.kubeconfig --junit target/junit-kind.xml $(ARGS)

kind-up: ## create the kind cluster from kind.yaml and side-load the proxy image
	$(KIND) create cluster --name $(KIND_CLUSTER) --config kind.yaml
	docker pull $(PROXY_IMAGE) && $(KIND) load docker-image --name $(KIND_CLUSTER) $(PROXY_IMAGE)

kind-down: ## delete the kind cluster
	$(KIND) delete cluster --name $(KIND_CLUSTER)

bench: controlplane node ## benchmarks: local cluster and real node start-up; the whole suite on simulated and on real nodes with timings, floor, wall and their ratio (BENCH_FLAGS=--profile=dev skips the optimised build)
	$(CARGO) bench $(BENCH_FLAGS) --bench interposer_latency
	DRA_E2E_BINARIES_DIR=$(BINARIES) $(CARGO) bench $(BENCH_FLAGS) --bench local_cluster_startup
	DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) $(CARGO) bench $(BENCH_FLAGS) --bench real_node_startup
	$(CARGO) build
	DRA_E2E_BINARIES_DIR=$(BINARIES) hack/bench-suite.sh "simulated nodes" --cluster local $(ARGS)
	DRA_E2E_BINARIES_DIR=$(BINARIES) DRA_E2E_NODE_BINARIES_DIR=$(NODE_BINARIES) hack/bench-suite.sh "$(REAL_NODES) real nodes" --cluster local --node-kind real --nodes $(REAL_NODES) --tags @DynamicResourceAllocation $(ARGS)

SOAK_RUNS ?= 10
soak: controlplane ## run the local suite SOAK_RUNS times (default 10); pass/fail per run and every scenario that failed once
	DRA_E2E_BINARIES_DIR=$(BINARIES) hack/soak.sh $(SOAK_RUNS) $(ARGS)

ci: ## what CI runs
	.ci/run
