# podsafe — build, test and run targets. `make help` lists them.
GO        ?= go
PKGS      ?= ./...
# The packages whose tests take longest, named first so that go test starts
# them first (it runs packages in the order given, two at a time on two
# CPUs): the spec suite alone takes about six minutes, and started last it
# would be the whole run's tail.
SLOW_PKGS ?= ./specs/ ./specs/kube/ ./target/kube/ ./cluster/ ./nemesis/ ./apiserver/
BIN       ?= bin/podsafe
TESTFLAGS ?= -race -count=1 -timeout 14m
BENCHTIME ?= 2s
# pingcap/failpoint: markers are made live at compile time by a toolexec
# (go build/test -toolexec) that rewrites copies of the sources in a
# temporary directory and never the tree: internal/fptoolexec, pingcap's
# failpoint-toolexec with the pinned rewriter (its own module pins
# FAILPOINT_VERSION) and three of that tool's faults mended (see its doc).
# Failpoint builds keep their own GOCACHE: a shared cache would hand them
# the objects of ordinary builds, whose markers are inert (and ordinary
# builds would get live markers).
FAILPOINT_VERSION  ?= v0.0.0-20240528011301-b51a646c7c86
FAILPOINT_BIN      ?= $(HOME)/.cache/podsafe/failpoint-$(FAILPOINT_VERSION)
FAILPOINT_TOOLEXEC ?= $(FAILPOINT_BIN)/fptoolexec
FAILPOINT_GOCACHE  ?= $(HOME)/.cache/podsafe/failpoint-gocache
# A failpoint build: every go command of a recipe that needs live markers
# runs as $(FAILPOINT_GO) build|test|run $(FAILPOINT_FLAGS). TMPDIR is the
# recipe's own (FAILPOINT_TMP), so a killed build leaves nothing in /tmp.
FAILPOINT_GO       = GOCACHE=$(FAILPOINT_GOCACHE) $(GO)
FAILPOINT_FLAGS    = -toolexec=$(FAILPOINT_TOOLEXEC)
FAILPOINT_TMP      = tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; export TMPDIR="$$tmp"
# The default short suite: the README's main job.
RUNFLAGS  ?= --workload register --nemesis partition --time-limit 30s

.PHONY: help build test unit lint vet fmt bench bench-etcd bench-scale scale run chaos chaos-kube conformance conformance-loaded conformance-kube kubectl-conformance client-conformance clean failpoint-toolexec failpoint-env build-failpoints test-failpoints check-clean bugzoo oracle fuzz mutation

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## build bin/podsafe
	$(GO) build -o $(BIN) ./cmd/podsafe

test: lint kube-binaries ## the full test suite (package tests, specs with the kube smoke, then the failpoint build), under 15 minutes once the kube binaries are cached
	@# PODSAFE_KUBE=1: the kube target's tests fail, rather than skip, when
	@# its binaries are missing. The read-after-watch program at full size
	@# (10,000 objects) needs the speed of a build without the race
	@# detector. The failpoint build's tests run beside the rest: most of
	@# both is scenarios waiting in real time (run one after the other they
	@# kept one of two CPUs busy), so side by side they take the longer of
	@# the two rather than the sum; kubectl's conformance script follows
	@# them there (its build is most of its time), then the client-go and
	@# controller-runtime conformance test. Their output follows the
	@# rest. The race detector's reports go to files, printed at the end,
	@# where a truncated log still shows them.
	@fplog=$$(mktemp); \
	{ $(MAKE) --no-print-directory test-failpoints; a=$$?; $(MAKE) --no-print-directory kubectl-conformance; b=$$?; $(MAKE) --no-print-directory client-conformance; exit $$((a | b | $$?)); } > $$fplog 2>&1 & fp=$$!; \
	rc=0; racelog=$$(mktemp -d); \
	echo "PODSAFE_KUBE=1 $(GO) test $(TESTFLAGS) $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS)"; \
	PODSAFE_KUBE=1 GORACE="log_path=$$racelog/race $$GORACE" $(GO) test $(TESTFLAGS) $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS)) $(PKGS) || rc=1; \
	echo "$(GO) test -count=1 -timeout 5m -run '^TestReadAfterWatch$$' ./nemesis/"; \
	$(GO) test -count=1 -timeout 5m -run '^TestReadAfterWatch$$' ./nemesis/ || rc=1; \
	$(MAKE) --no-print-directory oracle || rc=1; \
	wait $$fp || { rc=1; echo "make test-failpoints, kubectl-conformance or client-conformance FAILED"; }; \
	echo "== make test-failpoints, then kubectl-conformance and client-conformance (run beside the tests above):"; cat $$fplog; rm -f $$fplog; \
	for f in $$racelog/race.*; do [ -e "$$f" ] || continue; \
		echo "== the race detector's report ($$(grep -c 'WARNING: DATA RACE' $$f) in $$f), its first 150 lines (last, so that a log's tail shows it):"; \
		head -n 150 "$$f"; rc=1; done; rm -rf $$racelog; \
	exit $$rc

# The differential oracle: podsafe's scheduler plugins and graceful deletion
# against upstream kube-scheduler and kube-apiserver of the pinned version, in a
# nested module (oracle/go.mod) so the main module does not depend on
# k8s.io/kubernetes.
oracle: ## differential tests against upstream kube-scheduler and kube-apiserver (nested module)
	cd oracle && $(GO) test -count=1 -timeout 10m ./...

# kubectl's conformance script: kubectl itself (k8s.io/kubectl at the
# release of podsafe's client-go, run in process) against the embedded
# cluster as cluster up serves it, asserting what it prints. A nested module
# (kubectlconf/go.mod), so the main module does not depend on kubectl.
kubectl-conformance: ## kubectl against the embedded cluster: columns, paging, explain, logs, dry runs, errors, identities, rollouts (nested module)
	cd kubectlconf && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# client-go's informers and a controller-runtime manager (the release of
# podsafe's client-go) against a three-member embedded cluster through leader
# crashes, partitions and pauses; their caches must equal the server at the
# end. A nested module (clientconf/go.mod), so the main module does not
# depend on controller-runtime.
client-conformance: ## client-go informers and a controller-runtime manager through faults, caches equal to the server (nested module)
	cd clientconf && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...

# Built to a temporary name and renamed: a build running the previous
# binary is not disturbed.
failpoint-toolexec: ## build the toolexec of failpoint builds (internal/fptoolexec) into FAILPOINT_BIN
	@grep -q 'github.com/pingcap/failpoint $(FAILPOINT_VERSION)$$' internal/fptoolexec/go.mod || \
	  { echo "internal/fptoolexec/go.mod must pin github.com/pingcap/failpoint $(FAILPOINT_VERSION), as go.mod does"; exit 1; }
	@mkdir -p $(FAILPOINT_BIN) && cd internal/fptoolexec && \
	  $(GO) build -o $(FAILPOINT_TOOLEXEC).$$$$ . && mv -f $(FAILPOINT_TOOLEXEC).$$$$ $(FAILPOINT_TOOLEXEC)

# For a failpoint build by hand: eval "$$(make -s failpoint-env)", then
# GOCACHE=$$FAILPOINT_GOCACHE go test -toolexec=$$FAILPOINT_TOOLEXEC ./...
failpoint-env: failpoint-toolexec ## print the exports a failpoint build by hand needs (FAILPOINT_TOOLEXEC, FAILPOINT_GOCACHE)
	@echo export FAILPOINT_TOOLEXEC=$(FAILPOINT_TOOLEXEC)
	@echo export FAILPOINT_GOCACHE=$(FAILPOINT_GOCACHE)

build-failpoints: failpoint-toolexec ## build bin/podsafe-failpoints, whose markers are live (switch them per process with GO_FAILPOINTS)
	@$(FAILPOINT_TMP); $(FAILPOINT_GO) build $(FAILPOINT_FLAGS) -o $(BIN)-failpoints ./cmd/podsafe

# The tests that need live failpoints, in a failpoint build; the tree is
# only read, and check-clean guards that it stays so.
test-failpoints: failpoint-toolexec ## tests that need live failpoints (a failpoint build: toolexec, its own GOCACHE; part of make test)
	@set -e; $(FAILPOINT_TMP); \
	PODSAFE_FAILPOINTS=1 $(FAILPOINT_GO) test $(FAILPOINT_FLAGS) $(TESTFLAGS) -run 'Failpoint' ./nemesis/ ./nemesis/fpprobe/ ./raftstore/; \
	PODSAFE_FAILPOINTS=1 $(FAILPOINT_GO) test $(FAILPOINT_FLAGS) -count=1 -timeout 14m -run 'TestSpecs' ./specs/ -ginkgo.label-filter=bugzoo
	@$(MAKE) --no-print-directory check-clean

# The bug zoo: every planted bug under a scenario that can expose it (caught or
# missed, time to detect), then the zoo's scenarios with no bug for
# BUGZOO_CLEAN_SEEDS seeds each (no violation allowed). A failpoint build.
BUGZOO_CLEAN_SEEDS ?= 3
BUGZOOFLAGS        ?=
bugzoo: failpoint-toolexec ## plant every bug of the zoo, report caught/missed and time to detect, then a clean seed matrix
	@set -e; $(FAILPOINT_TMP); \
	$(FAILPOINT_GO) run $(FAILPOINT_FLAGS) ./cmd/podsafe bugzoo --clean-seeds $(BUGZOO_CLEAN_SEEDS) $(BUGZOOFLAGS)
	@$(MAKE) --no-print-directory check-clean

# Mutation testing: gremlins (this release, installed once into
# GREMLINS_BIN) lists the mutants of the system under test; podsafe mutation
# applies a sample of MUTATION_PER_PACKAGE per package, drawn with
# MUTATION_SEED (then more, until every guarantee the code implements has
# MUTATION_PER_GUARANTEE, when that is above 0), through go's -overlay (the
# tree is never written) and judges each by the package's unit tests and podsafe's runs. MUTATION_PKGS
# (comma or space separated, e.g. ./cluster/storage) narrows the packages.
# With the defaults: about 80 minutes on 2 cores (see README).
GREMLINS_VERSION       ?= v0.6.0
GREMLINS_BIN           ?= $(HOME)/.cache/podsafe/gremlins-$(GREMLINS_VERSION)
MUTATION_PKGS          ?=
MUTATION_PER_PACKAGE   ?= 5
MUTATION_SEED          ?= 1
MUTATION_PER_GUARANTEE ?= 0
MUTATION_STORE         ?= store/mutation
# MUTATION_COMMIT=HEAD measures the last commit instead of the working tree.
MUTATION_COMMIT        ?=
MUTATIONFLAGS          ?=
mutation: ## mutants of the system under test, each judged by unit tests and podsafe's runs; table in MUTATION_STORE/latest/mutation.md
	@test -x $(GREMLINS_BIN)/gremlins || GOBIN=$(GREMLINS_BIN) $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	$(GO) run ./cmd/podsafe mutation --gremlins $(GREMLINS_BIN)/gremlins --per-package $(MUTATION_PER_PACKAGE) --per-guarantee $(MUTATION_PER_GUARANTEE) --seed $(MUTATION_SEED) --store $(MUTATION_STORE) $(if $(MUTATION_COMMIT),--commit $(MUTATION_COMMIT)) $(if $(strip $(MUTATION_PKGS)),--packages "$(strip $(MUTATION_PKGS))") $(MUTATIONFLAGS)

check-clean: ## fail if failpoint-rewritten files (of failpoint-ctl, which podsafe no longer runs) are in the tree
	@left=$$(find . -name '*__failpoint_stash__*' -o -name 'binding__failpoint_binding__.go' | grep -v '^./.git/' || true); \
	if [ -n "$$left" ]; then echo "failpoint-rewritten files in the tree (restore them with git checkout, delete the rest):"; echo "$$left"; exit 1; fi

unit: ## package tests only, without the race detector (quick)
	$(GO) test -count=1 $(PKGS)

lint: vet fmt ## vet and gofmt check

vet:
	$(GO) vet $(PKGS)
	cd oracle && $(GO) vet ./...
	cd internal/fptoolexec && $(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Native Go fuzzing: each target for FUZZTIME, one after another; a crasher
# lands in the package's testdata/fuzz/FuzzXxx and fails the target. The
# seed corpora replay in every go test run. Minimizing a new input is
# capped, so that a slow target keeps fuzzing.
FUZZTIME  ?= 60s
FUZZFLAGS ?= -parallel 2 -fuzzminimizetime 10s
FUZZ_TARGETS ?= history:FuzzRead history:FuzzWalkProto checker:FuzzCheck checker:FuzzPodDecode checker:FuzzPoPlain8 checker:FuzzContainsQuoted apiserver:FuzzRequestBody apiserver:FuzzPodNodeName raftstore:FuzzCanonical specs:FuzzScenario
fuzz: ## run every fuzz target for FUZZTIME (default 60s) each, one after another
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t#*:}; echo "== $$name ./$$pkg/"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./$$pkg/; \
	done

bench: ## benchmarks (store, API, checker, kubelet scale), then the store beside a real etcd; compare runs with benchstat
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./raftstore/ ./apiserver/ ./checker/ ./cluster/...
	$(MAKE) --no-print-directory bench-etcd

# podsafe's store beside a real 3-member etcd (the kube target's cached
# binary; skipped with a message without one), in interleaved rounds, with
# the ratios (nested module bench/etcd).
ETCD_ROUNDS   ?= 5
ETCD_DURATION ?= 10s
bench-etcd: ## podsafe's store (through its API and raw) beside a real etcd, and its API beside kube-apiserver+etcd: writes/s, per CPU-second, ratios
	$(GO) -C bench/etcd run . -rounds $(ETCD_ROUNDS) -duration $(ETCD_DURATION)

# Kubernetes' own limits in one process: 5,000 kubelets and 150,000 running
# pods (BenchmarkKubeletScale), at time scale 1 as a real cluster's leases
# and statuses run, with the Go heap held under BENCH_SCALE_MEMLIMIT (a soft
# limit: the collector works harder near it rather than let the heap double).
# About 20 minutes of both cores; peak RSS, live heap, goroutines, creates/s
# and create->Running percentiles are printed.
BENCH_SCALE_NODES    ?= 5000
BENCH_SCALE_PODS     ?= 150000
BENCH_SCALE_MEMLIMIT ?= 19GiB
bench-scale: ## 5,000 nodes and 150,000 running pods in one process (BenchmarkKubeletScale at time scale 1); about 20 minutes, under 20 GiB
	GOMEMLIMIT=$(BENCH_SCALE_MEMLIMIT) $(GO) test -run '^$$' -bench KubeletScale -benchtime 1x -timeout 2h ./cluster/ \
	  -args -kubelet.nodes $(BENCH_SCALE_NODES) -kubelet.pods $(BENCH_SCALE_PODS) -kubelet.timescale 1 -kubelet.hold 60s

# The scale scenario: pets and spread on 5,000 nodes in three zones, zones
# cut in turn (scenarios/scale-5k.yaml); SCALEFLAGS adds flags (--nodes 500
# for a smaller one).
SCALEFLAGS ?=
scale: build ## the 5,000-node scenario (pets+spread, zone partitions); about 10 minutes and 6 GB
	./$(BIN) test --scenario scenarios/scale-5k.yaml $(SCALEFLAGS)

run: build ## the default short chaos suite on the embedded cluster
	./$(BIN) test $(RUNFLAGS)

# The kube target's control plane: etcd, kube-apiserver, kube-scheduler and
# kube-controller-manager built from the Go module proxy into the user cache
# directory, once per pair of versions. Empty KUBE_VERSION: the release
# matching podsafe's client-go. A cold build takes ~1,000 CPU-s and 3.5 GB.
KUBE_VERSION ?=
.PHONY: kube-binaries
kube-binaries: ## build or reuse the real Kubernetes and etcd binaries (cached by version)
	$(GO) run ./cmd/podsafe kube build $(if $(KUBE_VERSION),--version $(KUBE_VERSION))

CHAOS_TIME ?= 2m
chaos: ## the chaos matrix (every workload under every kind of fault), CHAOS_TIME per cell
	PODSAFE_CHAOS_TIME=$(CHAOS_TIME) $(GO) test -count=1 -timeout 0 ./specs/ -run TestSpecs -ginkgo.label-filter=chaos -ginkgo.v

# The kube target's chaos: every workload on a real control plane (3 etcd
# members, 2 API servers) under its real faults, KUBE_CHAOS_TIME each.
KUBE_CHAOS_TIME     ?= 3m
KUBE_CHAOS_NEMESIS  ?= partition,node-partition,kill,pause
KUBE_CHAOS_WORKLOADS ?= register pets replicas priority spread lifecycle
.PHONY: chaos-kube
chaos-kube: kube-binaries build ## every workload on the kube target (real processes, real faults), KUBE_CHAOS_TIME each
	@set -e; for w in $(KUBE_CHAOS_WORKLOADS); do \
	  ./$(BIN) test --target kube --members 3 --apiservers 2 --workload $$w --nemesis $(KUBE_CHAOS_NEMESIS) --time-limit $(KUBE_CHAOS_TIME) --store store; \
	done

# Reproductions of upstream Kubernetes bugs on the kube target: each is a
# scripted scenario in repro/, run on every release of REPRO_VERSIONS (built
# or reused); repro/catalog.yaml holds the facts (affected and fixed
# releases) and the candidates that cannot run here, with why. A verdict of
# Illegal (exit 1) is a reproduction, not a failure of the target; a crash
# or an undecided verdict fails it. Results go to REPRO_STORE, one
# directory per run (scenario.json names the version).
REPRO_VERSIONS ?= v1.34.4 v1.37.2
REPRO_STORE    ?= store/repro
# repro_on runs repro/$(1).yaml on each release of $(2) with the flags $(3).
define repro_on
	@set -e; for v in $(2); do \
	  $(MAKE) --no-print-directory kube-binaries KUBE_VERSION=$$v; \
	  rc=0; ./$(BIN) test --scenario repro/$(1).yaml --kube-version $$v --store $(REPRO_STORE) $(3) || rc=$$?; \
	  if [ $$rc -ne 0 ] && [ $$rc -ne 1 ]; then echo "$(1) on $$v: exit $$rc"; exit $$rc; fi; \
	done
endef
REPRO_ISSUES := 59848 138698 139992 141568 128307 129136
.PHONY: test-kube-issues $(addprefix test-kube-issue,$(REPRO_ISSUES))
test-kube-issue59848: build ## kubernetes#59848 (RV=0 initial list from a lagging API server) on each of REPRO_VERSIONS, with the kubelet's list and watch-list
	$(call repro_on,kubernetes-59848,$(REPRO_VERSIONS),--kubelet-pod-list list)
	$(call repro_on,kubernetes-59848,$(REPRO_VERSIONS),--kubelet-pod-list watch-list)

test-kube-issue138698: build ## kubernetes#138698 (node controller marks heart-beating nodes from a stale Lease cache) on each of REPRO_VERSIONS; on v1.37+ also with the fix's gate off
	$(call repro_on,kubernetes-138698,$(REPRO_VERSIONS))
	$(if $(filter v1.37.% v1.38.% v1.39.%,$(REPRO_VERSIONS)),$(call repro_on,kubernetes-138698-gate-off,$(filter v1.37.% v1.38.% v1.39.%,$(REPRO_VERSIONS))))

test-kube-issue139992: build ## kubernetes#139992 (taint eviction from a stale node cache) on each of REPRO_VERSIONS
	$(call repro_on,kubernetes-139992,$(REPRO_VERSIONS))

test-kube-issue141568: build ## kubernetes#141568 (taint eviction deletes a same-named replacement pod on another node) on each of REPRO_VERSIONS
	$(call repro_on,kubernetes-141568,$(REPRO_VERSIONS))

test-kube-issue128307: build ## kubernetes#128307 (preemption's node choice by highest victim priority) on each of REPRO_VERSIONS
	$(call repro_on,kubernetes-128307,$(REPRO_VERSIONS))

test-kube-issue129136: build ## kubernetes#129136 (the preemption choice reported as wrong after #128307) on each of REPRO_VERSIONS
	$(call repro_on,kubernetes-129136,$(REPRO_VERSIONS))

test-kube-issues: $(addprefix test-kube-issue,$(REPRO_ISSUES)) ## every reproduction of an upstream bug, on each of REPRO_VERSIONS, then the tables (REPRO_STORE/repro.md)
	./$(BIN) report --repro $(REPRO_STORE) --catalog repro/catalog.yaml

# The conformance suite (one spec per guarantee ID over shared runs) with its
# runs and report (conformance.html, .json, -junit.xml) kept in a store:
# make conformance on the embedded target (seconds per run), make
# conformance-kube on the kube target (real control plane at time scale 1,
# 60-120 s per run, ~12 minutes; the fencing guarantees and the in-process
# probes are skipped there as not covered). Each starts from an empty store, so
# the report is of that suite's runs only. Compare the two with
# podsafe report --compare store/conformance store/conformance-kube --out DIR.
CONFORMANCE_STORE      ?= store/conformance
CONFORMANCE_KUBE_STORE ?= store/conformance-kube
conformance: ## the conformance suite on the embedded target, runs and report in CONFORMANCE_STORE
	rm -rf $(CONFORMANCE_STORE)
	PODSAFE_CONFORMANCE_STORE=$(abspath $(CONFORMANCE_STORE)) $(GO) test -v -count=1 -timeout 30m ./specs/ -run TestSpecs -ginkgo.label-filter=conformance -ginkgo.v

# The conformance suite must not fail because the machine is slow: this
# runs it LOADED_RUNS times while a busy loop spins on every core, and
# fails if any run fails. Each run's results record the machine's load.
LOADED_RUNS ?= 5
conformance-loaded: ## the conformance suite LOADED_RUNS (5) times under a CPU hog on every core
	@hogs=""; for i in $$(seq $$(nproc)); do sh -c 'while :; do :; done' & hogs="$$hogs $$!"; done; \
	trap 'kill $$hogs 2>/dev/null' EXIT INT TERM; \
	echo "CPU hogs on $$(nproc) cores: $$hogs"; rc=0; passed=0; \
	for n in $$(seq $(LOADED_RUNS)); do \
	  echo "== conformance under a CPU hog: run $$n of $(LOADED_RUNS) (load $$(cut -d' ' -f1-3 /proc/loadavg))"; \
	  if $(GO) test -count=1 -timeout 60m ./specs/ -run TestSpecs -ginkgo.label-filter=conformance; then passed=$$((passed+1)); else rc=1; fi; \
	done; \
	echo "conformance under a CPU hog: $$passed of $(LOADED_RUNS) runs passed"; exit $$rc

conformance-kube: kube-binaries ## the conformance suite on the kube target, runs and report in CONFORMANCE_KUBE_STORE
	rm -rf $(CONFORMANCE_KUBE_STORE)
	PODSAFE_TARGET=kube PODSAFE_CONFORMANCE_STORE=$(abspath $(CONFORMANCE_KUBE_STORE)) $(GO) test -v -count=1 -timeout 0 ./specs/ -run TestSpecs -ginkgo.label-filter=conformance -ginkgo.timeout=2h -ginkgo.v

clean:
	rm -rf bin
