# The lima target's make targets (included by the Makefile).
#
# limactl and its guest agent are built from the Go module proxy into
# ~/.cache/sealbench/tools/lima-<version>, in Lima's own install layout (bin/limactl next to
# share/lima/lima-guestagent.Linux-x86_64, which limactl finds by that
# relative path), where sealbench looks for it (internal/toolcache). They
# are resolved in a throw-away module under tools/lima-build-<version>, so the project's go.mod never changes: the guest agent
# has Linux-only dependencies that limactl's resolution does not pull, hence
# its own `GOOS=linux go get`.

LIMA_VERSION := v1.2.1
LIMA_PREFIX := $(TOOLS)/lima-$(LIMA_VERSION)
LIMACTL := $(LIMA_PREFIX)/bin/limactl
LIMA_GUESTAGENT := $(LIMA_PREFIX)/share/lima/lima-guestagent.Linux-x86_64
LIMA_BUILD := $(TOOLS)/lima-build-$(LIMA_VERSION)
LIMA_LDFLAGS := -s -w -X github.com/lima-vm/lima/pkg/version.Version=$(LIMA_VERSION:v%=%)
# What running a Lima VM under QEMU needs on the host (sealbench drives
# limactl as uid 65534; the VM disk itself comes from `make vm-image`).
LIMA_PACKAGES := qemu-system-x86 qemu-utils openssh-client
LIMA_TEST_TIMEOUT ?= 60m
# The cells the lima test compares with local's; empty: all but C02 and C04
# (provision/lima's limaCells says why); LIMA_CELLS=all runs all twelve
# (about 4 minutes more here).
LIMA_CELLS ?=

.PHONY: lima-tools
lima-tools: $(LIMACTL) $(LIMA_GUESTAGENT) ## Build limactl and its guest agent (Lima v1.2.1) into ~/.cache/sealbench/tools, from the Go module proxy
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(LIMA_PACKAGES)"

$(LIMA_BUILD)/go.mod:
	@mkdir -p $(LIMA_BUILD)
	cd $(LIMA_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/lima-tools >/dev/null 2>&1
	cd $(LIMA_BUILD) && GOFLAGS=-mod=mod $(GO) get github.com/lima-vm/lima/cmd/limactl@$(LIMA_VERSION)
	cd $(LIMA_BUILD) && GOFLAGS=-mod=mod GOOS=linux GOARCH=amd64 $(GO) get github.com/lima-vm/lima/cmd/lima-guestagent@$(LIMA_VERSION)

$(LIMACTL): $(LIMA_BUILD)/go.mod
	@echo "building limactl $(LIMA_VERSION) into $(LIMA_PREFIX) (about 3 minutes the first time)"
	cd $(LIMA_BUILD) && GOFLAGS=-mod=mod $(GO) build -trimpath -ldflags '$(LIMA_LDFLAGS)' -o $@ github.com/lima-vm/lima/cmd/limactl

$(LIMA_GUESTAGENT): $(LIMA_BUILD)/go.mod
	@echo "building lima-guestagent $(LIMA_VERSION) (linux/amd64) into $(dir $@)"
	cd $(LIMA_BUILD) && GOFLAGS=-mod=mod CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LIMA_LDFLAGS)' -o $@ github.com/lima-vm/lima/cmd/lima-guestagent

.PHONY: test-lima
test-lima: lima-tools vm-image test-qemu ## The qemu target's tests (test-qemu), then a real Lima VM under QEMU (TCG): the conformance suite (two boots) with, on its first boot, ten cells (LIMA_CELLS=all: twelve) against local's counts, teardown, audit (root; about 13 minutes with test-qemu)
	SEALBENCH_LIMACTL=$(LIMACTL) SEALBENCH_LIMA_CELLS=$(LIMA_CELLS) $(GO) test -count=1 -timeout $(LIMA_TEST_TIMEOUT) -tags limatest -v ./provision/lima/...
