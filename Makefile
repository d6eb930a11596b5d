# Flotilla's routine acts. README and CI call these targets and nothing else.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULES := events platform migrations harness harness/containers services/scheduler services/rollout services/apply \
           services/status services/fleetctl services/hubsync services/standalone e2e
PKGS    := $(addprefix ./,$(addsuffix /...,$(MODULES)))
GOTEST_FLAGS ?= -race -timeout 40m
# Flags of the latency benchmark in make bench, e.g. LATENCY_FLAGS="-runs 5 -max-unavailable 100%".
LATENCY_FLAGS ?=
# How long make fuzz runs each fuzz target, and make test's brief pass of them.
FUZZTIME ?= 60s
TEST_FUZZTIME ?= 2s
# Flags of the fleet benchmark suite in make bench-scale, e.g. SCALE_FLAGS="-placements 200 -big-members 0".
SCALE_FLAGS ?=
KUBE_BINS = $(shell bash hack/kube-bins.sh)

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install what the tests and the quick start need (PostgreSQL from Debian packages)
	@bash hack/deps.sh

.PHONY: kube-bins
kube-bins: ## build kube-apiserver, kube-controller-manager, kubectl and etcd into the cache (once)
	@bash hack/kube-bins.sh >/dev/null

.PHONY: test
test: deps kube-bins ## a brief pass of every fuzz target, then unit and integration tests of every module with the race detector, then one run of each benchmark (and, where Docker answers, the compose suite and container tests on images built here)
	@FUZZTIME=$(TEST_FUZZTIME) bash hack/fuzz.sh $(MODULES)
	@set -o pipefail; \
	FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) bash hack/docker-test.sh go test -json $(GOTEST_FLAGS) $(PKGS) | go run ./harness/cmd/testreport
	@# Each benchmark once, on its own: go test runs packages one at a time when -bench is set.
	@FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) bash hack/bench-once.sh $(MODULES)

.PHONY: e2e
e2e: deps kube-bins ## end-to-end scenario tests (one per seed) on one standalone stack with 4 members, then the full fault matrix (e2e/faults)
	FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) go test $(GOTEST_FLAGS) -v ./e2e/scenarios/...
	@# One after the other: the fault suite's table reports recovery times, which a second stack
	@# on the same cores would stretch. Its 3-minute outages need more than the usual timeout.
	FLOTILLA_FAULTS=full FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) go test $(GOTEST_FLAGS) -timeout 90m -v ./e2e/faults/...

.PHONY: bench
bench: deps kube-bins ## benchmarks: the Go benchmarks, then placement latency against kubectl (e2e/bench/latency)
	FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) go test -run '^$$' -bench . -benchmem $(PKGS)
	FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) go run ./e2e/bench/latency $(LATENCY_FLAGS)

.PHONY: bench-scale
bench-scale: deps ## KubeFleet's scale scenarios against 1,000 (then 5,000) simulated members, one table beside KubeFleet's figures (e2e/bench/fleet)
	go run ./e2e/bench/fleet -suite -members 1000 -pick 100 -timeout 3m $(SCALE_FLAGS)

.PHONY: fuzz
fuzz: ## every fuzz target for FUZZTIME (60s) each, one at a time (FUZZ=regexp picks targets)
	@FUZZTIME=$(FUZZTIME) bash hack/fuzz.sh $(MODULES)

.PHONY: lint
lint: ## go vet, gofmt and staticcheck on every module
	go vet $(PKGS)
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go run honnef.co/go/tools/cmd/staticcheck@v0.6.1 $(PKGS)

.PHONY: images
images: deps kube-bins ## build every image here, with no registry: services, NATS, PostgreSQL (Debian), local members
	@bash hack/images.sh >/dev/null

.PHONY: compose-up
compose-up: deps kube-bins ## the compose stack with two local member clusters, from local images; waits until all is healthy
	@bash hack/compose.sh up

.PHONY: compose-down
compose-down: ## stop the compose stack (its state stays in named volumes)
	@bash hack/compose.sh down

.PHONY: run
run: deps kube-bins ## the quick start: every service, embedded NATS, local PostgreSQL, a local hub cluster and 3 local members
	@echo "run: building bin/flotilla-standalone and bin/fleetctl (a few minutes the first time, seconds after)"
	@go build -o bin/flotilla-standalone ./services/standalone/cmd/flotilla-standalone
	@go build -o bin/fleetctl ./services/fleetctl
	FLOTILLA_KUBE_BIN_DIR=$(KUBE_BINS) bin/flotilla-standalone --local-members 3 --hub --example $(RUN_FLAGS)
