# boxd: the two commands a newcomer needs are `make demo` and `make test`.
# Both install what is missing (Debian packages, containerd at the version
# go.mod pins) through scripts/setup.sh. Run as root.

GO        ?= go
BIN       := bin
BOXD_DEPS ?= /opt/boxd-deps
PROTO     := $(wildcard rpc/proto/boxd/v1/*.proto)

.PHONY: all setup build generate check-generated lint test unit demo bench clean

all: build

setup:
	bash scripts/setup.sh

build:
	$(GO) build -o $(BIN)/boxd ./cmd/boxd
	$(GO) build -tags urfave_cli_no_docs -o $(BIN)/boxctl-full ./cmd/boxctl/full
	$(GO) build -o $(BIN)/boxctl-mcp ./cmd/boxctl/mcp
	$(GO) build -o $(BIN)/boxctl ./cmd/boxctl
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o $(BIN)/boxd-init ./cmd/boxd-init

# Regenerates the committed API code (rpc/gen, the Python and TypeScript
# SDKs' modules) and reference (docs/api.md) from the protobuf schema.
generate: setup
	bash scripts/generate.sh rpc/gen

# Fails when the committed generated code or docs/api.md differs from what
# the schema gives.
check-generated: setup
	bash scripts/generate.sh --check

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Every test, unit and integration, against a real containerd and runc.
# Fails if any test skipped.
test: setup lint check-generated
	bash scripts/test.sh

demo: setup build
	bash scripts/demo.sh

bench: setup build
	bash bench/run.sh

clean:
	rm -rf $(BIN)
