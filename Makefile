# podsafe — build, test and run targets. `make help` lists them.
GO        ?= go
PKGS      ?= ./...
BIN       ?= bin/podsafe
TESTFLAGS ?= -race -count=1 -timeout 14m
BENCHTIME ?= 2s
# The default short suite: the README's main job.
RUNFLAGS  ?= --workload register --nemesis partition --time-limit 30s

.PHONY: help build test unit lint vet fmt bench run chaos clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: ## build bin/podsafe
	$(GO) build -o $(BIN) ./cmd/podsafe

test: lint ## the full test suite (package tests and specs), under 15 minutes
	$(GO) test $(TESTFLAGS) $(PKGS)

unit: ## package tests only, without the race detector (quick)
	$(GO) test -count=1 $(PKGS)

lint: vet fmt ## vet and gofmt check

vet:
	$(GO) vet $(PKGS)

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench: ## benchmarks (store, API, checker); compare runs with benchstat
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./raftstore/ ./apiserver/ ./checker/ ./cluster/...

run: build ## the default short chaos suite on the embedded cluster
	./$(BIN) test $(RUNFLAGS)

chaos: build ## longer chaos runs: every nemesis for 5 minutes, 3 seeds
	./$(BIN) test --workload register --nemesis partition --time-limit 5m --test-count 3

clean:
	rm -rf bin
