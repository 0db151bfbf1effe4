# usher — see README.md. Every target installs what it needs first.
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

GO ?= go
BIN := bin/usher

.PHONY: all deps build serve test vet lint unit bench benchsmoke bench-jobs fuzz clean web webcheck webtest pyclient image imagetest

all: build

deps:
	@bash scripts/deps.sh

build: deps
	$(GO) build -o $(BIN) ./cmd/usher

serve: build
	./$(BIN) serve

vet:
	$(GO) vet ./...

lint:
	$(GO) tool staticcheck ./...

# The scheduling core runs no goroutines, so the race detector has nothing
# to find in it and would only slow its simulations several times: it is
# tested without, first. The other packages run in the order given, two at
# a time: the longest (real asy in the sandbox, multi-node deployments)
# start first, so that no long one is left running alone at the end.
CORE_PACKAGES := ./internal/sched/...
SLOW_PACKAGES := ./internal/redisq/e2etest ./internal/sandbox ./internal/service ./internal/backend \
	./internal/examples ./internal/jobs/crashtest ./internal/redisq/backendrole ./internal/redisq/scheduler
unit:
	$(GO) test -count=1 -timeout 20m $(CORE_PACKAGES)
	slow=$$($(GO) list $(SLOW_PACKAGES)) && \
	$(GO) test -race -count=1 -timeout 20m $$slow $$($(GO) list ./... | grep -Ev '/internal/sched(/|$$)' | grep -Fvx "$$slow")

# vet and lint side by side, then the Go tests, then the browser scenarios
# beside the bench programs' smoke runs (the browser waits more than it
# computes); the Python client's suite (about 20 s) takes the slot of
# whichever of the two ends first.
test: deps
	$(MAKE) --no-print-directory -j2 --output-sync=target vet lint
	$(MAKE) --no-print-directory unit webcheck
	$(MAKE) --no-print-directory -j2 --output-sync=target webtest benchsmoke pyclient

# The browser front end: web/ bundled by esbuild into internal/webapp/dist,
# which the binary embeds.
web: deps
	cd web && node build.mjs

# The embedded bundle must equal a fresh build of web/.
webcheck: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	(cd web && node build.mjs "$$tmp/dist") && \
	diff -r "$$tmp/dist" internal/webapp/dist && echo "webcheck: embedded bundle matches a fresh build" || \
	{ echo "webcheck: internal/webapp/dist is stale; run make web and commit it" >&2; exit 1; }

# Browser scenarios in Debian's chromium against a real usher serve.
webtest: build
	@bash scripts/webtest.sh

# The Python client (clients/python) against a real usher serve, in
# Debian's python3 with Debian's python3-httpx (scripts/deps.sh).
PYTHON ?= /usr/bin/python3
pyclient: build
	cd clients/python && $(PYTHON) -m unittest discover -s tests -t tests

# The container image (Dockerfile, docs/deploy.md). GO_IMAGE and
# DEBIAN_IMAGE replace the Dockerfile's base images; IMAGE_FLAGS adds
# docker build flags.
IMAGE ?= usher:latest
DOCKER ?= docker
IMAGE_FLAGS ?=
image:
	$(DOCKER) build $(IMAGE_FLAGS) \
	  $(if $(GO_IMAGE),--build-arg GO_IMAGE=$(GO_IMAGE)) \
	  $(if $(DEBIAN_IMAGE),--build-arg DEBIAN_IMAGE=$(DEBIAN_IMAGE)) \
	  --build-arg VERSION=$$(git describe --always --dirty 2>/dev/null || echo dev) -t $(IMAGE) .

# The image test (scripts/imagetest.sh): builds the image on Debian's
# Docker engine with base images made from Debian's packages, runs it as
# docs/deploy.md says (docker run, compose, systemd) and prints its size
# and cold start. .ci/run runs it after make test.
imagetest: build
	@bash scripts/imagetest.sh

# Benchmarks: figures go into docs/benchmarks.md with this command.
bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./internal/sched/
	bash bench/cycleratio.sh -n 9
	bash bench/cycleratio.sh -rate -n 5 -ops 300000
	$(GO) run ./bench/ratehold -duration 60s
	$(GO) test -run '^$$' -bench 'Protocol$$' -benchmem ./internal/backend/
	$(GO) test -run '^$$' -bench BackendVsAsy -benchtime 30x ./internal/backend/
	$(GO) test -run '^$$' -bench Overhead -benchtime 30x ./internal/sandbox/
	$(GO) test -run '^$$' -bench 'Render3D|DisplayCost2D' -benchtime 20x -timeout 0 ./internal/sandbox/
	$(GO) test -run '^$$' -bench 'AsyVsBare|CachedResult' -benchtime 30x ./internal/service/
	$(GO) test -run '^$$' -bench RenderCachedVsFileServer -benchtime 3x ./internal/service/
	$(GO) test -run '^$$' -bench RenderVsAsy -benchtime 40x ./internal/service/
	$(GO) test -run '^$$' -bench RenderCachedPostVsAsy -benchtime 300x ./internal/service/
	$(GO) test -run '^$$' -bench 'Throughput|Pickup' -benchtime 100000x ./internal/jobsapi/
	$(GO) test -run '^$$' -bench 'EnqueueScheduled' -benchtime 100000x -count 5 ./internal/jobs/
	$(GO) run ./bench/asyload -backends 2 -tasks 60
	$(GO) run ./bench/asyload -mode estimates -backends 2 -clients 40 -every 150ms -warmup 40 -runs 3
	bash bench/estimates-redis.sh -b 2 -- -clients 40 -every 150ms -warmup 40 -runs 3
	bash bench/startup.sh -n 5 $(BIN)

# A tiny run of every bench program, so that a command docs/benchmarks.md
# gives cannot rot unnoticed; its figures mean nothing.
benchsmoke: build
	bash bench/cycleratio.sh -n 1 -ops 2000
	bash bench/cycleratio.sh -rate -n 1 -ops 2000
	$(GO) run ./bench/ratehold -duration 2s
	$(GO) run ./bench/gctimer -objects 10000 -waits 5
	$(GO) run ./bench/asyload -backends 1 -tasks 3 -warmup 1 -task-timeout 10s
	bash bench/estimates-redis.sh -b 1 -- -clients 3 -every 50ms -warmup 1 -busy-max 300ms
	$(GO) run ./bench/soak -duration 10s -every 3s -bin $(BIN)
	bash bench/startup.sh -n 1 $(BIN)
	cd bench/jobsbench && $(GO) vet . && $(GO) test -count=1 . && $(GO) run . -n 300 -runs 1 -pickups 2 -pickup-gap 10ms -settle 100ms \
		-usher-concurrency 64 -asynq-concurrency 20 -river-concurrency 100 \
		-scheduled 200 -probes 10 -probe-lead 300ms -probe-window 500ms -usher-bin $(CURDIR)/$(BIN)

# usher's generic jobs side by side with hibiken/asynq (on a redis-server)
# and riverqueue/river (on PostgreSQL), in bench/jobsbench's own module so
# that the anchors stay out of usher's go.mod; scripts/deps.sh installs
# redis-server and postgresql when missing (the smoke run in make test
# needs them too). Figures in docs/benchmarks.md; flags:
# make bench-jobs JOBSBENCH='-n 20000 -scheduled 100000,usher=1000000'.
JOBSBENCH ?=
bench-jobs: deps
	cd bench/jobsbench && $(GO) vet . && $(GO) run . $(JOBSBENCH)

# A short fuzzing pass over the scheduling core's event sequences.
fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzEvents -fuzztime 60s -fuzzminimizetime 5s ./internal/sched/
	$(GO) test -run '^$$' -fuzz FuzzParsePost -fuzztime 30s ./internal/renderapi/
	$(GO) test -run '^$$' -fuzz FuzzParseQuery -fuzztime 30s ./internal/renderapi/
	$(GO) test -run '^$$' -fuzz FuzzParseLine -fuzztime 30s ./internal/asysyms/
	$(GO) test -run '^$$' -fuzz FuzzParseLsR -fuzztime 30s ./internal/texinfo/
	$(GO) test -run '^$$' -fuzz FuzzParseRate -fuzztime 30s ./jobtype/

clean:
	rm -rf bin
