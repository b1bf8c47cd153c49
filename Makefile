# boxd: the two commands a newcomer needs are `make demo` and `make test`.
# Both install what is missing (Debian packages, containerd at the version
# go.mod pins) through scripts/setup.sh. Run as root.

GO        ?= go
BIN       ?= bin
# make install: PREFIX for the programs, SYSCONFDIR for the config,
# SYSTEMDDIR for the units, DESTDIR to stage the tree elsewhere (packaging,
# tests).
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
SYSTEMDDIR ?= /lib/systemd/system
DESTDIR    ?=
BOXD_DEPS ?= /opt/boxd-deps
PROTO     := $(wildcard rpc/proto/boxd/v1/*.proto)

.PHONY: all setup build install generate check-generated lint test unit demo bench clean

all: build

setup:
	bash scripts/setup.sh

build:
	$(GO) build -o $(BIN)/boxd ./cmd/boxd
	$(GO) build -tags urfave_cli_no_docs -o $(BIN)/boxctl-full ./cmd/boxctl-full
	$(GO) build -o $(BIN)/boxctl-mcp ./cmd/boxctl-mcp
	$(GO) build -o $(BIN)/boxctl ./cmd/boxctl
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-s -o $(BIN)/boxd-init ./cmd/boxd-init

# Installs the programs, boxd-init, the documentation, the systemd units and a default config
# (kept if one is there: it may have been edited). Paths in the units and
# the config follow PREFIX and SYSCONFDIR.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/boxd $(DESTDIR)$(PREFIX)/share/doc/boxd/docs \
		$(DESTDIR)$(SYSTEMDDIR) $(DESTDIR)$(SYSCONFDIR)/boxd
	install -m 0755 $(BIN)/boxd $(BIN)/boxctl $(BIN)/boxctl-full $(BIN)/boxctl-mcp $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BIN)/boxd-init $(DESTDIR)$(PREFIX)/libexec/boxd/boxd-init
	install -m 0644 README.md CHANGELOG.md $(DESTDIR)$(PREFIX)/share/doc/boxd/
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/boxd/docs/
	for u in boxd.service boxd.socket; do \
		sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' systemd/$$u > $(DESTDIR)$(SYSTEMDDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(SYSTEMDDIR)/$$u || exit 1; \
	done
	if [ ! -e $(DESTDIR)$(SYSCONFDIR)/boxd/config.toml ]; then \
		sed -e 's|@PREFIX@|$(PREFIX)|g' systemd/config.toml > $(DESTDIR)$(SYSCONFDIR)/boxd/config.toml && \
		chmod 0644 $(DESTDIR)$(SYSCONFDIR)/boxd/config.toml; \
	fi

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
	for m in bench rpc/gen rpc/apiwire sdk/go/boxd e2e/dockergo; do $(GO) vet -C $$m ./... || exit 1; done

# Every test, unit and integration, against a real containerd and runc.
# Fails if any test skipped.
test: setup lint check-generated
	bash scripts/test.sh

# The chaos harness in full (e2e TestChaos; `make test` runs it with a
# small budget): faults injected under load for BOXD_CHAOS_BUDGET (10m),
# BOXD_CHAOS_SEED repeats a run.
.PHONY: chaos
chaos: setup
	BOXD_CHAOS_BUDGET=$${BOXD_CHAOS_BUDGET:-10m} $(GO) test -count=1 -timeout 40m -v ./e2e -run '^TestChaos$$'

demo: setup build
	bash scripts/demo.sh

bench: setup build
	bash bench/run.sh

clean:
	rm -rf $(BIN)
