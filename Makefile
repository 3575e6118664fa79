# lockbench: which distributed lock should this service use?
#   make bench   answer which lock to use (lockbench advise on the default profile) and write the report
#   make bench-full  the same with every client-pause point, the lease loads under more faults, every durability profile on every backend and every clock fault, then every lock's envelope
#   make bench-envelope  where each lock breaks: lockbench envelope on pauses and clock jumps (ENVELOPE_BUDGET, 10m)
#   make test    vet and test everything against real servers (-race): CI's suite
#   make unit    the tests that need no server (go test -short), in about a minute and a half
#   make sample  docs/sample, the sample report, from a run's results dir (RUN=results/latest)
#
# Three modules: the benchmark (.) and the Redlock library's two, locker
# and backends/redlock (go.work joins them for development). make test and
# make unit test every one.

GO ?= go
BIN := $(CURDIR)/bin
# compose runs etcd members from this binary instead of building its own.
export LOCKBENCH_ETCD_MEMBER := $(BIN)/etcd-member
# The run over simulated hosts uploads this binary to them.
export LOCKBENCH_BINARY := $(BIN)/lockbench

# Where make bench writes results.json and the report.
OUT ?= results/$(shell date +%Y%m%d-%H%M%S)

# The library's modules, tested on their own (GOWORK=off): with the
# dependency versions their go.mod requires, what an adopter builds.
LIBRARY := locker backends/redlock

.PHONY: all deps build test unit fuzz bench bench-quick bench-full bench-envelope sample clean

all: build

deps:
	@scripts/deps.sh

# Static (CGO_ENABLED=0): lockbench run --inventory uploads this binary to
# the client hosts, whose C library may differ from this machine's.
# lockbench --version reads the commit from the build information, or
# from COMMIT where the toolchain stamps none (GOFLAGS=-buildvcs=false).
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.commit=$(COMMIT)" -o $(BIN)/ ./cmd/...

# Every test that starts servers has a deadline of its own (one minute
# unless it says otherwise: composetest.StartsServers), which fails a hung
# one with its goroutines; the package timeout is only a backstop, raised
# because compose's tests together take more than go test's 10 minutes on
# a loaded machine.
test: build
	@scripts/deps.sh test
	$(GO) vet ./...
	@for m in $(LIBRARY); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done
	$(GO) test -race -timeout 30m ./...
	$(GO) test -count=1 -timeout 30m -run 'TestAdaptive' -v ./answer/
	@for m in $(LIBRARY); do echo "== $$m"; (cd $$m && GOWORK=off $(GO) test -race -timeout 20m ./...) || exit 1; done
	scripts/consumer.sh
	scripts/serverfree.sh
	scripts/fuzz.sh

# Tests that start servers (composetest.StartsServers) or a browser skip
# under -short: nothing to install but Go.
unit:
	$(GO) test -short ./...
	@for m in $(LIBRARY); do (cd $$m && GOWORK=off $(GO) test -short ./...) || exit 1; done

# Every fuzz target, briefly (FUZZTIME each, one at a time).
fuzz:
	scripts/fuzz.sh

# lockbench advise on its default profile (both intents, every backend of
# the default suite, its load): the plan, the rounds and the report within
# 15 minutes (the budget covers the whole command).
bench: deps build
	$(BIN)/lockbench advise --budget 15m --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

bench-quick: deps build
	$(BIN)/lockbench run --suite quick --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

# Every client-pause point, the lease loads under more faults, every
# durability profile on every backend, every clock fault, split views,
# long holds and mixed schedules: about four times make bench's planned
# load; then every lock's envelope on every family (FULL_ENVELOPE_BUDGET,
# 60m), into OUT/envelope.
FULL_ENVELOPE_BUDGET ?= 60m
ENVELOPE_ALL = redis,redlock,redsync,rueidislock,sentinel,zookeeper,etcd,'postgres?mode=lease','postgres?mode=advisory'
bench-full: deps build
	$(BIN)/lockbench run --suite full --out $(OUT)
	$(BIN)/lockbench envelope --backend $(ENVELOPE_ALL) --budget $(FULL_ENVELOPE_BUDGET) --out $(OUT)/envelope
	@ln -sfn $(notdir $(OUT)) results/latest

# The safety envelopes (lockbench envelope): for each backend of the
# debate, where lock bugs and late writes start against a client pause's
# and a server clock jump's size. make bench leaves them to this target
# (it measures each fault at one size); the searches share
# ENVELOPE_BUDGET, and a search short of it says how far it got (10m: a
# boundary bracketed for every lock, most not yet to 2^¼).
ENVELOPE_BUDGET ?= 10m
bench-envelope: deps build
	$(BIN)/lockbench envelope --backend redis,redlock,zookeeper,etcd,'postgres?mode=lease' --fault client-pause,clock-jump \
		--budget $(ENVELOPE_BUDGET) --out $(OUT)
	@ln -sfn $(notdir $(OUT)) results/latest

# The sample report the front page links to: RUN's report re-rendered by
# this code into docs/sample from RUN's results.json alone (not its
# histories or server logs), its charts as paletted PNGs that index.html
# links, without SVGs: a few MB. Regenerate it from the make bench of the
# code it describes.
RUN ?= results/latest
SAMPLE := docs/sample
sample: build
	@test -f $(RUN)/results.json || { echo "make sample: no $(RUN)/results.json (make bench first, or RUN=DIR)"; exit 1; }
	rm -rf $(SAMPLE).new && mkdir -p $(SAMPLE).new
	cp $(RUN)/results.json $(SAMPLE).new/
	$(BIN)/lockbench report --link-charts --no-svg $(SAMPLE).new
	rm -f $(SAMPLE).new/results.csv
	rm -rf $(SAMPLE) && mv $(SAMPLE).new $(SAMPLE)
	@du -sh $(SAMPLE)

clean:
	rm -rf $(BIN) results/*/ results/latest
