# trainstep — run `make help` for the targets.

SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
CLUSTER_BIN := $(BIN)/cluster
PKGS := ./...
# Integration packages start a real test cluster each. `make integration` runs them in two lanes
# side by side, one package at a time in each: the packages with the real nodes' tests (test/nodes
# runs on two), and the rest, whose clusters have KWOK nodes only (most of their time is waiting on
# the cluster, so two clusters share 2 cores; real nodes are only ever in one lane).
INTEGRATION_PKGS := ./test/...
REAL_NODE_PKGS := ./test/cluster/ ./test/e2e/ ./test/nodes/
KWOK_PKGS = $(shell $(GO) list ./test/... | grep -v -e '/test/cluster$$' -e '/test/e2e$$' -e '/test/nodes$$')
INTEGRATION_TEST = TRAINSTEP_REAL_NODE=$(REAL_NODE_TESTS) TRAINSTEP_CLUSTER_BIN=$(CLUSTER_BIN) $(GO) test -count=1 -p 1 -timeout 25m
FUZZTIME ?= 5m
SCHEDULES ?= 100000
# make soak draws its fresh schedules from TRAINSTEP_SIM_BASE, a new one per run unless set; it
# is printed first so a run that passes can still be drawn again. make unit and make race (and so
# make test) draw theirs from SIM_TEST_BASE unless TRAINSTEP_SIM_BASE is set: their result is the
# code's, not the draw's; make soak is where new schedules are looked for.
SIM_BASE := $(or $(TRAINSTEP_SIM_BASE),$(shell echo $$(( $$(date +%s%N) % 1000000000 + 1000000 ))))
SIM_TEST_BASE := $(or $(TRAINSTEP_SIM_BASE),546821294)
SIM_BASE_SAY = echo "simulation: fresh schedules drawn from seed $(SIM_BASE) (TRAINSTEP_SIM_BASE=$(SIM_BASE) draws them again)"
SIM_TEST_BASE_SAY = echo "simulation: schedules drawn from seed $(SIM_TEST_BASE) (TRAINSTEP_SIM_BASE=N draws others)"
# RELEASE is the version this tree is: CHANGELOG.md's newest heading, the templates'
# app.kubernetes.io/version label and the image tag name it (a test checks they agree).
RELEASE := v0.4.0
# Stamped into trainstep (`trainstep version`) and the image's org.opencontainers.image.version.
VERSION ?= $(RELEASE)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
IMAGE_REPO := ghcr.io/trainstep/trainstep
IMAGE ?= $(IMAGE_REPO):$(RELEASE)
# The shipped templates, examples and docs name the release image by tag and digest,
# $(IMAGE_REPO):$(RELEASE)@sha256:<digest> (`make image-pin` writes it, `make image-verify`
# checks it). The digest is reproducible from the sources given the same Go toolchain,
# RELEASE_GO (the go command fetches it when it is not the local one), and the same CA
# bundle, the file CA_CERTIFICATES whose sha256 is RELEASE_CA_SHA256: Debian 12's
# ca-certificates 20230311+deb12u1 as update-ca-certificates bundles the package's own
# certificates (CA_PACKAGE_DIR), without the ones a machine adds to its own bundle.
RELEASE_GO := go1.26.8
CA_PACKAGE_DIR ?= /usr/share/ca-certificates/mozilla
CA_CERTIFICATES ?= $(BIN)/release-ca-certificates.crt
RELEASE_CA_SHA256 := a3413a37a8e09cc21b2c11c9ffb23d92d2fc9d1933c9e7617f5c4fba4f72d37d
# The files that name the release image: every shipped reference is rewritten by image-pin.
PINNED_FILES = $(shell git ls-files templates workflows docs README.md | grep -E '\.(ya?ml|md)$$')
# `make test` and `make integration` run the tests that need the test cluster's real node
# (root, containerd; test/e2e's Argo workflows among them). REAL_NODE=0 leaves them out on a
# machine without root; under CI=true that is refused. (`make cluster-up` starts the real
# node only with REAL_NODE=1, and REAL_NODES=2 starts two.)
REAL_NODE_TESTS := $(if $(filter 0,$(REAL_NODE)),0,1)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build trainstep and the demo trainer into bin/ (VERSION stamped into trainstep).
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/...

.PHONY: demo
demo: build ## Train the demo parameter-server job locally (no cluster needed).
	PATH="$(BIN):$$PATH" $(BIN)/trainstep run --local -f workflows/jobs/demo-ps.yaml --outputs-dir $(BIN)/demo-outputs --log-format console
	@echo "make demo: the output files are in $(BIN)/demo-outputs"

.PHONY: image
image: ## Build the trainstep OCI image archive into bin/trainstep-image.tar (no Docker needed); IMAGE names it, VERSION is stamped.
	$(GO) run ./hack/image -o $(BIN)/trainstep-image.tar -tag $(IMAGE) -version $(VERSION)

.PHONY: image-pin
image-pin: ## Build the release image (RELEASE with RELEASE_GO) and write <repo>:<tag>@sha256:<digest> into every shipped reference (templates, workflows, docs), and the commit it was built from into the README's pin.
	$(MAKE) --no-print-directory release-image
	@ref="$(IMAGE_REPO):$(RELEASE)@$$(cat $(BIN)/trainstep-release.digest)"; \
	  sed -E -i "s#$(subst .,\.,$(IMAGE_REPO)):v[0-9]+\.[0-9]+\.[0-9]+(@sha256:[0-9a-f]{64})?#$$ref#g" $(PINNED_FILES); \
	  commit=$$(git rev-parse HEAD); \
	  sed -E -i "s#(commit its sources are, \`|git checkout |trainstep/cmd/[a-z-]+@)[0-9a-f]{40}#\1$$commit#g" README.md docs/argo.md; \
	  echo "image-pin: the shipped references name $$ref, built from commit $$commit"

.PHONY: image-verify
image-verify: ## Rebuild the release image and check its digest is the one templates/workflowtemplate.yaml pins.
	$(MAKE) --no-print-directory release-image
	@pinned=$$(grep -oE '$(subst .,\.,$(IMAGE_REPO)):$(RELEASE)@sha256:[0-9a-f]{64}' templates/workflowtemplate.yaml | head -n1 | cut -d@ -f2); \
	  built=$$(cat $(BIN)/trainstep-release.digest); \
	  if [ "$$pinned" != "$$built" ]; then echo "image-verify: the templates pin $${pinned:-no digest}, the sources build $$built" >&2; exit 1; fi; \
	  echo "image-verify: $(IMAGE_REPO):$(RELEASE)@$$built is what these sources build"

# release-image builds the release's image archive and its digest, as the release does: the
# version is RELEASE exactly (never -dirty: pinning itself changes files), with RELEASE_GO.
.PHONY: release-image
release-image: $(CA_CERTIFICATES)
	GOTOOLCHAIN=$(RELEASE_GO) $(GO) run ./hack/image -o $(BIN)/trainstep-release.tar -tag $(IMAGE_REPO):$(RELEASE) -version $(RELEASE) \
	  -ca-certificates $(CA_CERTIFICATES) -ca-certificates-sha256 $(RELEASE_CA_SHA256) -digest-file $(BIN)/trainstep-release.digest

# The release's CA bundle, as update-ca-certificates writes it from the package alone: each
# certificate in order of its path, ending in a newline. Built afresh each time (it is small).
$(BIN)/release-ca-certificates.crt: FORCE
	@mkdir -p $(BIN)
	@set -e; for f in $$(find -L $(CA_PACKAGE_DIR) -type f -name '*.crt' | LC_ALL=C sort); do sed -e '$$a\' "$$f"; done > $@.new
	@mv $@.new $@

.PHONY: FORCE
FORCE:

##@ Test

.PHONY: test
test: test-deps real-node-opt-out integration-bins ## Install what the tests need, then run every check (lint, go.mod tidy) and test: unit, integration and the real node's end-to-end Argo tests (root; REAL_NODE=0 leaves those out, not under CI).
	@$(MAKE) --no-print-directory -j2 --output-sync=target integration-real-node-lane checks-then-kwok-lane

# The real nodes' tests mostly wait on containers and controllers, so the checks and unit tests
# run beside them, before the KWOK clusters' tests, in a lane of their own, one step at a time.
.PHONY: checks-then-kwok-lane
checks-then-kwok-lane:
	@$(MAKE) --no-print-directory verify
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory race
	@$(MAKE) --no-print-directory integration-kwok-lane

.PHONY: test-deps
test-deps: ## Install the Debian packages the tests need, only those missing (root; as another user it names them and the command, and fails).
	hack/test-deps.sh $(if $(filter 1,$(REAL_NODE_TESTS)),--real-node)

.PHONY: race
race: ## Run the reconciler's and the executor's unit tests under the race detector.
	@$(SIM_TEST_BASE_SAY)
	TRAINSTEP_SIM_BASE=$(SIM_TEST_BASE) $(GO) test -race -count=1 ./pkg/reconcile/... ./executor/...

.PHONY: unit
unit: ## Run unit tests (no cluster).
	@$(SIM_TEST_BASE_SAY)
	TRAINSTEP_SIM_BASE=$(SIM_TEST_BASE) $(GO) test -count=1 $$($(GO) list ./... | grep -v /test/)

.PHONY: integration
integration: real-node-opt-out integration-bins ## Run integration tests against the real test cluster, the real node's and test/e2e's included (REAL_NODE=0: without them).
	@$(MAKE) --no-print-directory -j2 --output-sync=target integration-real-node-lane integration-kwok-lane

# What the integration tests run: the cluster's binaries and the real node's packages.
.PHONY: integration-bins
integration-bins: cluster-bin cluster-bin-scheduler-plugins cluster-bin-kueue $(if $(filter 1,$(REAL_NODE_TESTS)),cluster-bin-node cluster-bin-argo node-deps)

# Each lane's output is printed when the lane ends.
.PHONY: integration-real-node-lane integration-kwok-lane
integration-real-node-lane:
	$(INTEGRATION_TEST) $(REAL_NODE_PKGS)
integration-kwok-lane:
	$(INTEGRATION_TEST) $(KWOK_PKGS)

.PHONY: real-node-opt-out
real-node-opt-out:
	@if [ "$(REAL_NODE_TESTS)" = 0 ]; then \
	  if [ "$${CI:-}" = true ]; then echo "REAL_NODE=0 is refused under CI=true: CI runs the real node's tests (as root)" >&2; exit 1; fi; \
	  echo "REAL_NODE=0: leaving out the tests that need the real node (test/e2e, test/nodes and test/cluster's *RealNode*)" >&2; \
	fi

.PHONY: integration-real-node
integration-real-node: cluster-bin cluster-bin-node cluster-bin-argo node-deps ## Run only the tests that need the real node (root), test/e2e's Argo workflows included.
	TRAINSTEP_REAL_NODE=1 TRAINSTEP_CLUSTER_BIN=$(CLUSTER_BIN) $(GO) test -count=1 -p 1 -timeout 25m -run 'RealNode' -v $(INTEGRATION_PKGS)

.PHONY: soak
soak: ## Run the controller's simulation over SCHEDULES drawn schedules (default 100000), each under 3 delivery orders.
	@$(SIM_BASE_SAY)
	TRAINSTEP_SIM_BASE=$(SIM_BASE) $(GO) test -count=1 -timeout 0 -run '^TestSimulation$$' ./pkg/reconcile/ -v -schedules $(SCHEDULES) | grep -v -e '^=== RUN' -e '^--- PASS'; exit $${PIPESTATUS[0]}

.PHONY: fuzz
fuzz: ## Fuzz parse → default → validate → render, then the progress endpoint's payload decoder, each for FUZZTIME (default 5m).
	$(GO) test ./pkg/render/ -run '^$$' -fuzz FuzzRenderPipeline -fuzztime $(FUZZTIME)
	$(GO) test ./pkg/trainerstatus/ -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)

# BENCH_SCENARIO=sweep measures only the sweep scenario (many steps at once), logged, and leaves
# BENCHMARKS.md as it was.
BENCH_SCENARIO ?= all

.PHONY: bench
bench: cluster-bin cluster-bin-kueue ## Measure launch, detection and teardown against a client-go baseline, up to 2048 workers, and sweeps of 16 and 64 steps at once; writes BENCHMARKS.md (BENCH_SCENARIO=sweep: the sweeps alone, logged).
	TRAINSTEP_BENCH=1 TRAINSTEP_BENCH_SCENARIO=$(BENCH_SCENARIO) TRAINSTEP_BENCH_VERSION=$(VERSION) TRAINSTEP_CLUSTER_BIN=$(CLUSTER_BIN) $(GO) test -count=1 -timeout 150m -run '^TestBench$$' -v ./test/bench/

.PHONY: lint
lint: ## gofmt and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: verify
verify: lint ## lint, then fail if go.mod/go.sum are not tidy.
	$(GO) mod tidy && git diff --exit-code go.mod go.sum

##@ Test cluster

.PHONY: cluster-bin
cluster-bin: ## Build (or reuse cached) etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok into bin/cluster.
	hack/cluster/build.sh $(CLUSTER_BIN)

.PHONY: cluster-bin-node
cluster-bin-node: ## Build (or reuse cached) the real node's kubelet, kube-proxy and pause into bin/cluster.
	hack/cluster/build.sh --node $(CLUSTER_BIN)

.PHONY: cluster-bin-argo
cluster-bin-argo: ## Build (or reuse cached) Argo's workflow-controller and argoexec (trainstep's Argo version) into bin/cluster.
	hack/cluster/build.sh --argo $(CLUSTER_BIN)

.PHONY: cluster-bin-scheduler-plugins
cluster-bin-scheduler-plugins: ## Build (or reuse cached) scheduler-plugins' scheduler (coscheduling) and controller, the second scheduler test/gang starts, into bin/cluster.
	hack/cluster/build.sh --scheduler-plugins $(CLUSTER_BIN)

.PHONY: cluster-bin-kueue
cluster-bin-kueue: ## Build (or reuse cached) Kueue's manager, which test/gang starts for gang kueue, into bin/cluster.
	hack/cluster/build.sh --kueue $(CLUSTER_BIN)

.PHONY: node-deps
node-deps: ## Install the real node's Debian packages: containerd, runc, CNI plugins, iptables (root).
	hack/cluster/install-node-deps.sh

.PHONY: cluster-up
cluster-up: cluster-bin $(if $(filter 1,$(REAL_NODE))$(REAL_NODES),cluster-bin-node) $(if $(filter 1,$(ARGO)),cluster-bin-argo) ## Start the test cluster in the background (REAL_NODE=1: with the real node, REAL_NODES=2: with two, ARGO=1: and Argo); kubeconfig at bin/cluster/kubeconfig.
	$(GO) run ./test/cluster/cmd/testcluster up --bin $(CLUSTER_BIN) $(if $(filter 1,$(REAL_NODE)),--real-node) $(if $(REAL_NODES),--real-nodes $(REAL_NODES)) $(if $(filter 1,$(ARGO)),--argo)

.PHONY: cluster-down
cluster-down: ## Stop the test cluster started by cluster-up.
	$(GO) run ./test/cluster/cmd/testcluster down --bin $(CLUSTER_BIN)

.PHONY: clean
clean: ## Remove bin/ (the cached cluster binaries outside the clone stay).
	rm -rf $(BIN)
