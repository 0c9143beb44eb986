# Parley's build and test entry points. `make help` lists every target.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec
.DEFAULT_GOAL := help

GO       ?= go
BIN      := bin
COMMIT   := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
VERSION  := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# System packages the build needs (cgo: libopus for Opus).
BUILD_DEBS := libopus-dev pkg-config gcc
# External peers the tests drive (CI installs them; locally their tests skip when missing).
TEST_DEBS  := espeak-ng sox libsox-fmt-all sip-tester baresip kamailio kamailio-tls-modules chromium ffmpeg

.PHONY: help deps deps-test build run test lint bench bench-e2e bench-e2e-srtp bench-rate bench-campaign-rate soak demo fmt clean

help: ## list every target
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

deps: ## install the system packages the build needs (libopus-dev…) when they are missing
	@scripts/apt-need $(BUILD_DEBS)

deps-test: deps ## also install the external peers the tests use (espeak-ng, sox, sipp, baresip, kamailio, chromium)
	@scripts/apt-need $(TEST_DEBS)

build: deps ## build bin/parley
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/parley ./cmd/parley

run: build ## build and start `parley serve` on the embedded default (SQLite in ./data, in-process bus)
	$(BIN)/parley serve

test: deps ## run every test with -race (peers missing locally are skipped; PARLEY_REQUIRE_PEERS=1 fails instead)
	$(GO) test -race -count=1 -timeout 30m -v -skip '^(TestSippLoad|TestSippSoak)$$' ./... 2>&1 | tee .test.log | grep -vE '^=== (RUN|PAUSE|CONT|NAME)'
	@# The SIP load test keeps 200 calls' media clocks in real time: it runs alone, not beside
	@# other packages' tests competing for the same two cores.
	$(GO) test -race -count=1 -timeout 10m -v -run '^TestSippLoad$$' ./sip/ 2>&1 | tee -a .test.log | grep -vE '^=== (RUN|PAUSE|CONT|NAME)'
	@echo "summary: $$(grep -c -- '--- PASS' .test.log) passed, $$(grep -c -- '--- FAIL' .test.log || true) failed, $$(grep -c -- '--- SKIP' .test.log || true) skipped (tests and subtests)"

# issue 22: the soak's length, call rate and concurrency (make soak SOAK_DURATION=2m SOAK_RATE=10).
SOAK_DURATION ?= 10m
SOAK_RATE     ?= 50
SOAK_LIMIT    ?= 200
SOAK_PROFILES ?=
soak: deps ## the SIP soak (not in make test): the load scenario for SOAK_DURATION with 1% ACK loss and 1% CANCEL races; goroutines, RSS and heap printed every 10 s; heap profiles at the middle and the end (in SOAK_PROFILES) and their difference printed
	PARLEY_SOAK=1 PARLEY_SOAK_DURATION=$(SOAK_DURATION) PARLEY_SOAK_RATE=$(SOAK_RATE) PARLEY_SOAK_LIMIT=$(SOAK_LIMIT) PARLEY_SOAK_PROFILES=$(SOAK_PROFILES) \
		$(GO) test -count=1 -timeout 90m -v -run '^TestSippSoak$$' ./sip/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT|NAME)'

lint: ## gofmt check and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: deps ## run the micro-benchmarks of the hot paths (ns/op, allocs/op)
	$(GO) test -run '^$$' -bench . -benchmem ./codec/... ./media/... ./session/...

bench-e2e: build ## standard end-to-end benchmark: SIP and WebRTC callers against parley serve and parley fakes (< 5 min); writes bench/results/latest.{json,md,svg}
	$(GO) run ./cmd/parley-bench --parley $(BIN)/parley --profile standard --out bench/results/latest --command "make bench-e2e"

# issue 21: the same benchmark with SRTP on the SIP callers' media (the bench trunk requires SRTP,
# allowed over its clear UDP signalling); compare its cores per call with bench-e2e's.
bench-e2e-srtp: build ## bench-e2e with SRTP (SDES, AES_CM_128_HMAC_SHA1_80) on every SIP call; writes bench/results/latest-srtp.{json,md,svg}
	$(GO) run ./cmd/parley-bench --parley $(BIN)/parley --profile standard --srtp --out bench/results/latest-srtp --command "make bench-e2e-srtp"

bench-rate: build ## the call-rate ceiling: SIP calls per second in steps (150 to 1000/s) until one fails; writes bench/results/rate.{json,md,svg}
	$(GO) run ./cmd/parley-bench --parley $(BIN)/parley --profile rate --out bench/results/rate --command "make bench-rate"

bench-campaign-rate: ## issue 15: a campaign of 2,000 contacts against sipp UAS; prints starts/s and double dials from sipp's log (SQLite; PostgreSQL too with PARLEY_TEST_DATABASE_URL)
	$(GO) test -run '^$$' -bench BenchmarkCampaignSippStarts -benchtime 1x -timeout 15m ./control/api/

demo: build ## hear an agent without a vendor account: a scripted call through the real engine and the fakes, recorded to data/demo.wav
	@scripts/apt-need espeak-ng
	$(BIN)/parley demo --out data/demo.wav

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output
	rm -rf $(BIN) .test.log
