# durachat: `make run` serves the API locally; `make test` runs every test.
#
# sam build calls the build-<LogicalId> targets (BuildMethod: makefile) with
# ARTIFACTS_DIR set; each puts one arm64 `bootstrap` there.

GO        ?= go
TOOLS     := $(CURDIR)/.tools
TOOLS_BIN := $(TOOLS)/bin
# The Lambda Runtime Interface Emulator, for the end-to-end function test.
RIE_MODULE  := github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
TEST_TIMEOUT ?= 30m

LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags "-s -w"
GO_FILES = $(shell find . -name '*.go' -not -path './.tools/*' -not -path '*/node_modules/*' -not -path './.aws-sam/*')

.PHONY: run test test-pi tools fmt-check vet bench build clean \
	build-RestoreFunction build-OffloadFunction build-MemoryFunction build-CompactFunction

run:
	$(GO) run ./cmd/durachat serve

build-RestoreFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/restore

build-OffloadFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/offload

build-MemoryFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/memory

build-CompactFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/compact

# build compiles every program for the host.
build:
	$(GO) build ./...

# tools installs the pinned test tools: the local SQS server's Node modules
# (infra/sqs/package-lock.json) and the Runtime Interface Emulator.
tools:
	npm ci --prefix infra/sqs --no-audit --no-fund
	GOBIN=$(TOOLS_BIN) $(GO) install $(RIE_MODULE)@$(RIE_VERSION)

fmt-check:
	@out="$$(gofmt -l $(GO_FILES))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# test needs no running services: the tests start the local AWS-protocol
# servers they use (minidyn and gofakes3 in-process, the SQS server as a
# child of the test binary) and the emulator, and stop them when they end;
# then it runs test-pi.
test: tools fmt-check vet
	PATH="$(TOOLS_BIN):$$PATH" $(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) test-pi

# test-pi tests the pi extension (clients/pi) in real pi sessions, with the
# pinned SDK, pi-ai's faux model and the local server built from cmd/durachat.
test-pi:
	npm ci --prefix clients/pi --no-audit --no-fund
	npm --prefix clients/pi test

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf .aws-sam

# eval-images measures image-aware summaries against a real model
# (DURACHAT_MODEL and its key; see docs/perf-images.md). Not part of test.
.PHONY: eval-images
eval-images:
	$(GO) run ./eval/cmd/eval-images $(EVAL_FLAGS)
