# usher — see README.md. Every target installs what it needs first.
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

GO ?= go
BIN := bin/usher

.PHONY: all deps build serve test vet lint unit bench fuzz clean

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

unit:
	$(GO) test -race -count=1 ./...

test: deps vet lint unit

# Benchmarks: figures go into docs/benchmarks.md with this command.
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./internal/sched/
	$(GO) test -run '^$$' -bench 'Protocol$$' -benchmem ./internal/backend/
	$(GO) test -run '^$$' -bench BackendVsAsy -benchtime 30x ./internal/backend/
	$(GO) test -run '^$$' -bench Overhead -benchtime 30x ./internal/sandbox/
	$(GO) test -run '^$$' -bench 'AsyVsBare|CachedResult' -benchtime 30x ./internal/service/
	$(GO) run ./bench/asyload -backends 2 -tasks 60

# A short fuzzing pass over the scheduling core's event sequences.
fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzEvents -fuzztime 60s -fuzzminimizetime 5s ./internal/sched/

clean:
	rm -rf bin
