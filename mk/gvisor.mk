# The gvisor target's make targets (included by the Makefile).
#
# runsc (gVisor's OCI runtime) is built from the Go module proxy into
# ~/.cache/sealbench/tools/runsc-<version>/bin/runsc: gvisor.dev/gvisor's
# pseudo-versions are its `go` branch, a Go-buildable tree (the master
# branch builds with Bazel). It is resolved in a throw-away module under
# tools/runsc-build-<version>, so the project's go.mod never changes.
# scripts/dockerd gives the private dockerd the newest runsc there as the
# runtime "runsc" (systrap platform: no KVM), which the gvisor target's
# Sandboxes run with; `make test` builds it first, so that the gvisor tests
# run rather than skip.

RUNSC_VERSION := v0.0.0-20260905035102-160fafc42237
RUNSC := $(TOOLS)/runsc-$(RUNSC_VERSION)/bin/runsc
RUNSC_BUILD := $(TOOLS)/runsc-build-$(RUNSC_VERSION)

.PHONY: gvisor-tools
gvisor-tools: $(RUNSC) ## Build gVisor's runsc (the gvisor target's runtime) into ~/.cache/sealbench/tools, from the Go module proxy

$(RUNSC_BUILD)/go.mod:
	@mkdir -p $(RUNSC_BUILD)
	cd $(RUNSC_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/runsc-tools >/dev/null 2>&1
	cd $(RUNSC_BUILD) && GOFLAGS=-mod=mod $(GO) get gvisor.dev/gvisor/runsc@$(RUNSC_VERSION)

$(RUNSC): $(RUNSC_BUILD)/go.mod
	@echo "building runsc $(RUNSC_VERSION) into $(dir $@) (about 2 minutes the first time)"
	cd $(RUNSC_BUILD) && GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags '-s -w -X gvisor.dev/gvisor/runsc/version.version=$(RUNSC_VERSION)' -o $@ gvisor.dev/gvisor/runsc

# `make tools` (which `make test` runs) builds runsc too.
tools: $(RUNSC)
