# The qemu target's make targets (included by the Makefile).
#
# The qemu target needs no tool of its own: QEMU and qemu-img from Debian,
# and the VM image `make vm-image` builds (cached by lock). make test-lima
# runs test-qemu first, so CI (.ci/run) covers both VM targets.

QEMU_PACKAGES := qemu-system-x86 qemu-utils
QEMU_TEST_TIMEOUT ?= 40m
# The cells the qemu test compares with local's: C01 and C09 (the issue's
# check) in CI, since lima's test runs the others on the same guest kernel;
# QEMU_CELLS=all runs every cell (about 16 minutes here).
QEMU_CELLS ?= C01,C09

.PHONY: qemu-deps
qemu-deps: ## Install QEMU's Debian packages, when missing (as root)
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(QEMU_PACKAGES)"

.PHONY: test-qemu
test-qemu: vm-image qemu-deps ## A real QEMU microvm (TCG), no Lima: the conformance suite (two boots) with, on its first boot, C01 and C09 (QEMU_CELLS=all: every cell) against local's counts, teardown, audit (root)
	SEALBENCH_QEMU_CELLS=$(QEMU_CELLS) $(GO) test -count=1 -timeout $(QEMU_TEST_TIMEOUT) -tags qemutest -v ./provision/qemu/...
