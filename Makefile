# sealbench: `make help` lists the targets. The README's two commands are
# `make run` (the main job) and `make test` (what .ci/run calls).

SHELL := /bin/bash
GO ?= go
# Tools built from the Go module proxy live outside the clone, by name and
# version, so a fresh clone (CI's) reuses them (internal/toolcache says the same).
CACHE_DIR := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sealbench
TOOLS := $(CACHE_DIR)/tools
COSIGN_VERSION := v2.5.0
COSIGN := $(TOOLS)/cosign-$(COSIGN_VERSION)/bin/cosign
OUT ?= out
KEYS ?= $(OUT)/keys
FUZZTIME ?= 15s
# LAYERFS_ROUNDS is how many alternating rounds make bench-layerfs takes the
# medians of (LAYERFS_ROUNDS=3 for a quicker look).
LAYERFS_ROUNDS ?= 5
# Extra flags for `make run`, e.g. RUN_FLAGS='--cells C01,C12 --samples 3'.
RUN_FLAGS ?=
TEST_TIMEOUT ?= 40m
# Debian packages the tests use; installed when missing (root only).
# ripgrep: the agent-tools suite's T5 runs rg on the host in the cells' test;
# chromium: the HTML report's test opens it in a headless browser;
# openssh-server: the fake remote hosts (sshx/sshtest) are its sshd;
# iptables: the Kubernetes fixture's sweep (internal/kubetest) removes the kubelet's chains;
# bash-completion, fish, zsh: the shell completion tests complete in each.
TEST_PACKAGES := git ripgrep coreutils dpkg apt skopeo docker-registry umoci busybox-static fuse3 fio stress-ng xfsprogs e2fsprogs chromium openssh-server iptables bash-completion fish zsh
# What building and booting VM images needs (make vm-image, make test-vm).
VM_PACKAGES := mmdebstrap e2fsprogs qemu-utils qemu-system-x86

.DEFAULT_GOAL := help

# A target's own make targets (mk/lima.mk: limactl, make test-lima).
include $(wildcard mk/*.mk)

.PHONY: help
help: ## Show this help
	@echo "sealbench: reproducible, signed filesystem benchmarks of sandbox backends"
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "Variables: OUT=$(OUT) KEYS=$(KEYS) FUZZTIME=$(FUZZTIME); SEALBENCH_PASSWORD is the key password (empty by default here)."

.PHONY: build
build: ## Build bin/sealbench (the host build, with signing)
	$(GO) build -o bin/sealbench ./cmd/sealbench

# Under sudo, what make made (out/, bin/) goes back to the user who ran
# sudo, as sealbench does with what it writes: `sudo make run` must not
# leave a root-owned out/.
give_back = if [ -n "$${SUDO_UID-}" ] && [ "$${SUDO_UID}" != 0 ]; then chown -R "$$SUDO_UID:$${SUDO_GID:-$$SUDO_UID}" $(1); fi

# make install: where, and under which root (DESTDIR, for packagers).
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BUILD := $(OUT)/install

.PHONY: install
install: ## Install sealbench and layerfsd into $(DESTDIR)$(PREFIX)/bin, with bash, zsh and fish completions and man pages (PREFIX=/usr/local; DESTDIR=/tmp/pkg for a package's tree)
	@d="$(DESTDIR)$(PREFIX)"; while [ ! -e "$$d" ]; do d=$$(dirname "$$d"); done; [ -w "$$d" ] || { \
		echo "make install: $$d is not writable: run it as root (sudo make install), or pass PREFIX=$$HOME/.local"; exit 2; }
	@mkdir -p $(INSTALL_BUILD)
	$(GO) build -o $(INSTALL_BUILD)/sealbench ./cmd/sealbench
	$(GO) build -o $(INSTALL_BUILD)/layerfsd ./cmd/layerfsd
	@rm -rf $(INSTALL_BUILD)/man && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./internal/mangen $(INSTALL_BUILD)/man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	install -m 0755 $(INSTALL_BUILD)/sealbench $(INSTALL_BUILD)/layerfsd $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(INSTALL_BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	@set -e; for p in sealbench layerfsd; do \
		$(INSTALL_BUILD)/$$p completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$p; \
		$(INSTALL_BUILD)/$$p completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_$$p; \
		$(INSTALL_BUILD)/$$p completion fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/$$p.fish; \
	done
	@echo "installed sealbench and layerfsd into $(DESTDIR)$(PREFIX)/bin, their man pages and shell completions"
	@$(call give_back,$(OUT))

.PHONY: uninstall
uninstall: ## Remove what make install installed (the same PREFIX and DESTDIR)
	rm -f $(DESTDIR)$(PREFIX)/bin/sealbench $(DESTDIR)$(PREFIX)/bin/layerfsd \
		$(DESTDIR)$(PREFIX)/share/man/man1/sealbench.1 $(DESTDIR)$(PREFIX)/share/man/man1/sealbench-*.1 \
		$(DESTDIR)$(PREFIX)/share/man/man1/layerfsd.1 $(DESTDIR)$(PREFIX)/share/man/man1/layerfsd-*.1
	@for p in sealbench layerfsd; do rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/$$p \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_$$p $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/$$p.fish; done

.PHONY: deps
deps: ## Install the Debian packages the tests need, when missing (as root)
	@missing=""; for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages:$$missing (run as root, or install them)"; exit 1; fi; \
		echo "installing:$$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

.PHONY: tools
tools: $(COSIGN) ## Build the tools tests use (cosign, from the Go module proxy) into ~/.cache/sealbench/tools

$(COSIGN):
	@echo "building cosign $(COSIGN_VERSION) into $(dir $(COSIGN)) (a few minutes the first time)"
	GOBIN=$(dir $(COSIGN)) GOFLAGS= $(GO) install github.com/sigstore/cosign/v2/cmd/cosign@$(COSIGN_VERSION)

.PHONY: check
check: ## gofmt and go vet, for both builds (host and in-bundle); the host build for macOS too
	@unformatted=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags sealbench_bundle ./cmd/...
	GOOS=darwin GOARCH=arm64 $(GO) build ./...

# The tests that say, in a line of their own, whether the committed Sandbox
# image id was checked or (its locked packages being in no source) a fresh
# lock's: `make test` runs them verbosely and prints those lines.
REPRO_TESTS := ^(TestSandboxImageReproducible|TestExportedDebsReproduceTheCommittedImage)$$

.PHONY: test
test: deps tools check ## Everything CI runs: checks, all tests (with a private dockerd when none answers), short fuzz runs
	scripts/dockerd with env SEALBENCH_COSIGN=$(COSIGN) $(GO) test -timeout $(TEST_TIMEOUT) -skip '$(REPRO_TESTS)' ./...
	@$(MAKE) --no-print-directory test-reproducible
	$(MAKE) fuzz

.PHONY: test-reproducible
test-reproducible: ## The Sandbox image built twice and from exported packages: which image id was checked, and why
	@set -o pipefail; $(GO) test -count=1 -run '$(REPRO_TESTS)' -v ./vmimages/ | grep -E 'REPRODUCIBILITY|^(--- |ok|FAIL|PASS|panic)' | sed 's/^ *sandbox_test.go:[0-9]*: //; s/^ *sources_test.go:[0-9]*: //'

.PHONY: relock
relock: ## Refresh the committed package locks and the golden image id together; prints the versions that moved (for the commit message)
	@mkdir -p $(OUT)
	@set -o pipefail; { echo "vmimages: relock, Debian's archive moved on"; echo; \
		$(GO) run ./cmd/sealbench image lock --arch all; } | tee $(OUT)/relock.txt
	$(GO) test -count=1 -run '^TestSandboxImageReproducible$$' ./vmimages/ -update
	@git --no-pager diff --stat -- vmimages/locks vmimages/testdata
	@echo; echo "commit them together; the message names every version that moved:"
	@echo "  git commit -F $(OUT)/relock.txt -- vmimages/locks vmimages/testdata"

.PHONY: test-short
test-short: ## The quick tests only (no builds, no root-only tests)
	$(GO) test -short ./...

.PHONY: fuzz
# Each target's new inputs are minimized for at most 100 runs: minimizing
# for the default 60 s stalls a 15 s run at 0 executions a second from the
# first interesting input on, and one still minimizing when the time is up
# fails with "context deadline exceeded".
FUZZFLAGS = -fuzztime $(FUZZTIME) -fuzzminimizetime 100x
fuzz: ## Short fuzz runs of every parser (FUZZTIME=15s each)
	$(GO) test -run '^$$' -fuzz '^FuzzParseBundleManifest$$' $(FUZZFLAGS) ./manifests/
	$(GO) test -run '^$$' -fuzz '^FuzzReadSamples$$' $(FUZZFLAGS) ./manifests/
	$(GO) test -run '^$$' -fuzz '^FuzzUnpackLayer$$' $(FUZZFLAGS) ./standin/
	$(GO) test -run '^$$' -fuzz '^FuzzEngineAPIRequests$$' $(FUZZFLAGS) ./standin/
	$(GO) test -run '^$$' -fuzz '^FuzzImageLoad$$' $(FUZZFLAGS) ./standin/
	$(GO) test -run '^$$' -fuzz '^FuzzVerifyAttestation$$' $(FUZZFLAGS) ./bundle/sign/

.PHONY: bench-layerfs
bench-layerfs: deps ## The twelve cells on a LayerFS workspace, a plain directory, go-fuse's loopback and libfuse's passthrough_hp (scripts/libfuse builds it; skipped, saying so, when absent), each over /dev/fuse and io_uring, on disk, tmpfs and XFS: ratios and geomeans, medians of LAYERFS_ROUNDS=5 rounds (root, FUSE; tens of minutes)
	$(GO) test -count=1 -run '^$$' -bench . -benchtime $(LAYERFS_ROUNDS)x -timeout 45m ./layerfs/...
	@echo "the same cells with the overlay, the plain directory and the loopback's directory on a tmpfs:"
	LAYERFS_BENCH_OVERLAY=/dev/shm $(GO) test -count=1 -run '^$$' -bench Cells -benchtime $(LAYERFS_ROUNDS)x -timeout 45m ./layerfs/
	@echo "the same cells with everything on XFS, whose reflinks make copy-ups clones:"
	scripts/with-loopfs xfs $(GO) test -count=1 -run '^$$' -bench Cells -benchtime $(LAYERFS_ROUNDS)x -timeout 45m ./layerfs/

.PHONY: bench-layerfs-verify
bench-layerfs-verify: ## What checking a blob against its digest costs: C09's cold read of 64 MiB checked by its stamp, checked by reading it and unchecked, in turns, and the ratios (root, FUSE)
	$(GO) test -count=1 -run '^$$' -bench ColdReadVerify -benchtime 10x -v ./layerfs/

.PHONY: bench-uring
bench-uring: deps ## FUSE over io_uring against /dev/fuse: 1,000 creates through go-fuse's loopback over each, in process and as C01's shell (root; turns enable_uring on for the run and restores it)
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 20x -timeout 10m ./layerfs/uring/

.PHONY: bench-exec
bench-exec: ## An exec's round trip over a bare fork+exec+wait (the stand-in in-process and in its own process), then the stand-in beside dockerd (scripts/dockerd start), as root
	$(GO) test -count=1 -run '^$$' -bench ExecOverhead -benchtime 2000x ./standin/
	DOCKER_HOST=$${DOCKER_HOST:-unix:///run/sealbench-dockerd/docker.sock} \
		$(GO) test -count=1 -run '^$$' -bench ExecStandinVsDockerd -benchtime 300x ./standin/
	$(GO) test -count=1 -run '^$$' -bench SandboxExec -benchtime 500x ./standin/sandbox/

.PHONY: vm-image
vm-image: ## Build the amd64 VM disk, kernel and initrd for Lima (minutes; cached by lock)
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(VM_PACKAGES)"
	$(GO) run ./cmd/sealbench image vm --arch amd64

.PHONY: test-vm
test-vm: ## Build the VM image and boot it under QEMU (TCG) to a login prompt
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(VM_PACKAGES)"
	$(GO) test -count=1 -timeout 30m -tags vmtest -run 'TestVMImage' -v ./vmimages/

.PHONY: bench
bench: ## Verify throughput against sha256sum, and seal time with a warm cache
	$(GO) test -run '^$$' -bench . -benchtime 3x ./bundle/

# The main job's steps, shared by `make run` and `make bench-protocol`:
# a key pair in $(KEYS) on first use (password SEALBENCH_PASSWORD, empty if
# unset); a sealed, verified bundle (directory and tar), whose directory
# scripts/main-job reads from $(OUT)/seal.txt; then the run on local and
# docker: the dockerd DOCKER_HOST names, or the default socket's, or a
# private one started for the run and stopped after it (scripts/dockerd);
# local alone, said plainly before and after, where your own DOCKER_HOST
# does not answer or no dockerd can be started.
.PHONY: sealed
sealed: build
	@mkdir -p $(OUT)
	@if [ ! -f $(KEYS)/sealbench.key ]; then \
		SEALBENCH_PASSWORD="$${SEALBENCH_PASSWORD-}" ./bin/sealbench keygen --out $(KEYS); fi
	@SEALBENCH_PASSWORD="$${SEALBENCH_PASSWORD-}" ./bin/sealbench seal --key $(KEYS)/sealbench.key --out $(OUT) | tee $(OUT)/seal.txt
	@b=$$(sed -n 's/^  directory //p' $(OUT)/seal.txt); \
	./bin/sealbench verify --bundle $$b --key $(KEYS)/sealbench.pub && \
	./bin/sealbench verify --bundle $$b.tar --key $(KEYS)/sealbench.pub

.PHONY: run
run: sealed ## The main job: seal, verify, run the twelve cells on local and docker (a private dockerd when none answers), report, tear down, audit, sign the results
	@rc=0; OUT=$(OUT) KEYS=$(KEYS) scripts/main-job --sign-key $(KEYS)/sealbench.key $(RUN_FLAGS) || rc=$$?; \
		$(call give_back,$(OUT) bin); exit $$rc

.PHONY: bench-protocol
bench-protocol: sealed ## The protocol checks itself: the prefault's mechanisms side by side, then C06-C10, 6 samples, local and docker: LayerFS over native within 0.8-1.5 and A/A within 0.9-1.1 per cell, or exit 1 (minutes; root)
	$(GO) test -count=1 -run '^$$' -bench Prefault -benchtime 10x ./runner/
	SEALBENCH_BENCH_DIR=/dev/shm $(GO) test -count=1 -run '^$$' -bench Prefault -benchtime 10x ./runner/
	@rm -rf $(OUT)/bench-protocol
	@OUT=$(OUT) KEYS=$(KEYS) scripts/main-job --cells C06,C07,C08,C09,C10 --samples 6 --out $(OUT)/bench-protocol $(RUN_FLAGS)
	./bin/sealbench report $(OUT)/bench-protocol --out $(OUT)/bench-protocol/report.md \
		--bounds layerfsOverNative=0.8:1.5 --bounds nativeRepeatOverNative=0.9:1.1
