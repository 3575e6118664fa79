# lockbench: which distributed lock should this service use?
#   make bench   run the comparison on this machine and write the report
#   make test    vet and test everything against real servers (-race)

GO ?= go
BIN := $(CURDIR)/bin
# compose runs etcd members from this binary instead of building its own.
export LOCKBENCH_ETCD_MEMBER := $(BIN)/etcd-member

.PHONY: all deps build test bench bench-quick clean

all: build

deps:
	@scripts/deps.sh

build:
	$(GO) build -o $(BIN)/ ./cmd/...

test: deps build
	$(GO) vet ./...
	$(GO) test -race ./...

clean:
	rm -rf $(BIN) results
