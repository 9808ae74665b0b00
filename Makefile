# omar — two commands do all set-up on a fresh machine:
#   make run    installs what is missing, builds, and runs the main job
#               (league self-play PPO on the built-in model) with progress bars
#   make test   the whole test suite (vet, gofmt, race detector on the engine)
#
# Needs Go ≥ 1.26 and npm (for the prebuilt llama.cpp libraries); everything
# else is fetched from the Go module proxy and the npm registry (and, where
# apt-get runs as root, Debian's chromium for the web page's browser tests).

GO        ?= go
FLAVOR    ?= cpu
LLAMA_DIR := lib/llama/$(FLAVOR)
BIN       := bin/omar
RUN_DIR   ?= runs/default
PKGS      := ./...
# The engine and its transport are concurrent code: always under -race.
RACE_PKGS := ./engine/...
# Reference tokenizers, chat templates and the Jinja engine (npm), for the
# real-model tests (git-ignored).
FIXTURES  := .cache/npm-fixtures

export OMAR_LLAMA_LIB ?= $(CURDIR)/$(LLAMA_DIR)
export OMAR_NPM_FIXTURES ?= $(CURDIR)/$(FIXTURES)/node_modules
# Where apt-get runs as root, install-browser.sh installs Chromium, so a
# browser test that finds none fails instead of skipping.
REQUIRE_BROWSER := $(shell command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && echo 1)

.PHONY: all run test build deps llama browser fixtures check-go check-npm fmt-check vet bench clean

all: build

check-go:
	@command -v $(GO) >/dev/null 2>&1 || { echo "make: Go is not installed (need Go >= 1.26: https://go.dev/doc/install)" >&2; exit 1; }
	@$(GO) version | awk '{split($$3,v,"."); sub("go","",v[1]); if (v[1] < 1 || (v[1] == 1 && v[2] < 26)) { print "make: need Go >= 1.26, have " $$3 > "/dev/stderr"; exit 1 }}'

# npm only downloads the llama.cpp tarball; install it when missing (Debian).
check-npm:
	@command -v npm >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    echo "installing npm (apt-get) to fetch the llama.cpp libraries"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
	  else echo "make: npm is missing: install Node.js/npm, or set OMAR_LLAMA_LIB to a llama.cpp v0.5.0 build (docs/llama.md)" >&2; exit 1; fi; }

# The llama.cpp shared libraries (git-ignored), fetched once.
llama: $(LLAMA_DIR)/.stamp
$(LLAMA_DIR)/.stamp: scripts/install-llama.sh
	@$(MAKE) --no-print-directory check-npm
	bash scripts/install-llama.sh $(FLAVOR)

deps: check-go llama
	$(GO) mod download

# The npm reference implementations the real-model tests compare against.
fixtures:
	@$(MAKE) --no-print-directory check-npm
	@bash scripts/install-npm-fixtures.sh $(FIXTURES)

# Chromium for the web page's browser tests (Debian's package).
browser:
	@bash scripts/install-browser.sh

build: deps
	$(GO) build -o $(BIN) ./cmd/omar

run: build
	$(BIN) selfplay --out $(RUN_DIR) --overwrite

fmt-check: check-go
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet: deps
	$(GO) vet $(PKGS)

test: deps browser fixtures fmt-check vet
	$(GO) test -race -count=1 $(RACE_PKGS)
	OMAR_REQUIRE_BROWSER=$(REQUIRE_BROWSER) $(GO) test -count=1 -timeout 20m $(PKGS)

bench: build
	$(GO) test -run XXX -bench . -benchtime 2s ./engine/
	$(BIN) bench decode --parallel 1,8,32

clean:
	rm -rf bin
