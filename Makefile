# lockbench: which distributed lock should this service use?
#   make bench   answer which lock to use (lockbench advise on the default profile) and write the report
#   make bench-full  the same with every client-pause point, the lease loads under more faults, every durability profile on every backend and every clock fault
#   make test    vet and test everything against real servers (-race): CI's suite
#   make unit    the tests that need no server (go test -short), in about a minute and a half

GO ?= go
BIN := $(CURDIR)/bin
# compose runs etcd members from this binary instead of building its own.
export LOCKBENCH_ETCD_MEMBER := $(BIN)/etcd-member
# The run over simulated hosts uploads this binary to them.
export LOCKBENCH_BINARY := $(BIN)/lockbench

# Where make bench writes results.json and the report.
OUT ?= results/$(shell date +%Y%m%d-%H%M%S)

.PHONY: all deps build test unit bench bench-quick bench-full clean

all: build

deps:
	@scripts/deps.sh

# Static (CGO_ENABLED=0): lockbench run --inventory uploads this binary to
# the client hosts, whose C library may differ from this machine's.
build:
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cmd/...

# Every test that starts servers has a deadline of its own (one minute
# unless it says otherwise: composetest.StartsServers), which fails a hung
# one with its goroutines; the package timeout is only a backstop, raised
# because compose's tests together take more than go test's 10 minutes on
# a loaded machine.
test: build
	@scripts/deps.sh test
	$(GO) vet ./...
	$(GO) test -race -timeout 30m ./...

# Tests that start servers (composetest.StartsServers) or a browser skip
# under -short: nothing to install but Go.
unit:
	$(GO) test -short ./...

# lockbench advise on its default profile (both intents, every backend of
# the default suite, its load): the plan, then rounds within 15 minutes.
bench: deps build
	$(BIN)/lockbench advise --budget 15m --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

bench-quick: deps build
	$(BIN)/lockbench run --suite quick --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

# Every client-pause point, the lease loads under more faults, every
# durability profile on every backend and every clock fault: about three
# times as long as make bench.
bench-full: deps build
	$(BIN)/lockbench run --suite full --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

clean:
	rm -rf $(BIN) results/*/ results/latest
