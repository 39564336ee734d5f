# The Kubernetes test cluster's make targets (included by the Makefile).
#
# kube-apiserver and the kubelet are built from the Go module proxy into
# ~/.cache/sealbench/tools/kube-<version>/bin (internal/toolcache), where
# the test fixture (internal/kubetest) looks for them. They are resolved in a
# throw-away module under tools/kube-build-<version>, so the project's go.mod
# never changes: it requires k8s.io/kubernetes, whose go.mod points each of
# its k8s.io/* libraries at ./staging (a replace that only counts in its own
# module), so the throw-away module replaces each of them with the matching
# v0.x release, the list read from that go.mod. The rest of the cluster
# (etcd, containerd, runc, iptables, the CNI loopback plugin) is Debian's,
# installed when missing.
#
# For the RuntimeClass gvisor, containerd's runsc shim (containerd-shim-runsc-v1)
# is built from the same gVisor module and version as runsc (mk/gvisor.mk),
# into runsc's bin directory, where the fixture finds both. agent-sandbox's
# controller (sigs.k8s.io/agent-sandbox, its CRDs beside it) is built the same
# way into tools/agent-sandbox-<version>: the fixture installs the CRDs and runs
# the controller against its API server.

# The newest v1.34 patch the Go module proxy serves (and its libraries' v0.34.12).
KUBE_VERSION := v1.34.12
KUBE_LIB_VERSION := v0$(patsubst v1%,%,$(KUBE_VERSION))
KUBE_PREFIX := $(TOOLS)/kube-$(KUBE_VERSION)
KUBE_APISERVER := $(KUBE_PREFIX)/bin/kube-apiserver
KUBELET := $(KUBE_PREFIX)/bin/kubelet
KUBE_BUILD := $(TOOLS)/kube-build-$(KUBE_VERSION)
# What `kubectl version` and the node's status say; kube-apiserver derives
# its compatibility version from it, so it must be the real one.
KUBE_VERSION_X = -X $(1).gitVersion=$(KUBE_VERSION) -X $(1).gitMajor=1 \
	-X $(1).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) -X $(1).gitTreeState=clean
KUBE_LDFLAGS := -s -w $(call KUBE_VERSION_X,k8s.io/component-base/version) $(call KUBE_VERSION_X,k8s.io/client-go/pkg/version)
# The cluster's other processes, from Debian (the fixture runs them in a
# private configuration of its own), and the CNI loopback plugin that brings
# up the pods' lo (their network is otherwise none: internal/kubetest/nonet).
KUBE_PACKAGES := etcd-server containerd runc iptables containernetworking-plugins
KUBE_TEST_TIMEOUT ?= 15m
# The packages whose tests run on the cluster (each binary starts its own,
# one at a time: the cluster takes a machine-wide lock).
KUBE_TEST_PACKAGES := ./internal/kubetest/ ./kubeengine/ ./provision/kubernetes/

# containerd's runsc shim, beside runsc (mk/gvisor.mk: RUNSC, RUNSC_VERSION).
RUNSC_SHIM := $(dir $(RUNSC))containerd-shim-runsc-v1
RUNSC_SHIM_BUILD := $(TOOLS)/runsc-shim-build-$(RUNSC_VERSION)
# agent-sandbox: the controller and its four CRDs (k8s/crds).
AGENT_SANDBOX_VERSION := v1.0.1
AGENT_SANDBOX_PREFIX := $(TOOLS)/agent-sandbox-$(AGENT_SANDBOX_VERSION)
AGENT_SANDBOX_CONTROLLER := $(AGENT_SANDBOX_PREFIX)/bin/agent-sandbox-controller
AGENT_SANDBOX_BUILD := $(TOOLS)/agent-sandbox-build-$(AGENT_SANDBOX_VERSION)

.PHONY: kube-tools
kube-tools: $(KUBE_APISERVER) $(KUBELET) $(RUNSC) $(RUNSC_SHIM) $(AGENT_SANDBOX_CONTROLLER) ## Build kube-apiserver and the kubelet (v1.34.12), containerd's runsc shim and agent-sandbox's controller (v1.0.1) into ~/.cache/sealbench/tools, from the Go module proxy; install etcd, containerd, runc and the CNI plugins
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(KUBE_PACKAGES)"

# A device plugin that offers /dev/fuse to pods, for the cluster of
# scripts/kube-cluster (a user's cluster needs one): squat's
# generic-device-plugin, built from the Go module proxy.
DEVICE_PLUGIN_VERSION := v0.0.0-20260515115838-2cc50b05d4d2
DEVICE_PLUGIN_PREFIX := $(TOOLS)/generic-device-plugin-$(DEVICE_PLUGIN_VERSION)
DEVICE_PLUGIN := $(DEVICE_PLUGIN_PREFIX)/bin/generic-device-plugin
DEVICE_PLUGIN_BUILD := $(TOOLS)/generic-device-plugin-build-$(DEVICE_PLUGIN_VERSION)
# Where scripts/kube-cluster keeps its cluster.
KUBE_CLUSTER_DIR ?= /var/tmp/sealbench-kube-cluster
KUBE_CLUSTER_ENV = KUBE_BIN=$(KUBE_PREFIX)/bin RUNSC_BIN=$(dir $(RUNSC)) AGENT_SANDBOX=$(AGENT_SANDBOX_PREFIX) DEVICE_PLUGIN=$(DEVICE_PLUGIN)

.PHONY: kube-cluster
kube-cluster: kube-tools $(DEVICE_PLUGIN) ## Start a one-node Kubernetes cluster to run the kubernetes and agent-sandbox targets on (scripts/kube-cluster: by hand, not the test fixture; root); it prints the run's flags
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="openssl curl busybox-static iproute2"
	$(KUBE_CLUSTER_ENV) scripts/kube-cluster up $(KUBE_CLUSTER_DIR)

.PHONY: test-kube-cluster
test-kube-cluster: kube-tools $(DEVICE_PLUGIN) ## Check scripts/kube-cluster: up, a pod under runc and one under gVisor with /dev/fuse and no network, down, and the machine as it was (root)
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="openssl curl busybox-static iproute2"
	$(KUBE_CLUSTER_ENV) scripts/kube-cluster test

.PHONY: kube-cluster-down
kube-cluster-down: ## Stop the cluster of `make kube-cluster` and remove everything it made
	scripts/kube-cluster down $(KUBE_CLUSTER_DIR)

$(DEVICE_PLUGIN):
	@mkdir -p $(DEVICE_PLUGIN_BUILD)
	@echo "building generic-device-plugin $(DEVICE_PLUGIN_VERSION) into $(dir $@)"
	cd $(DEVICE_PLUGIN_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/device-plugin-tools >/dev/null 2>&1 && \
		GOFLAGS=-mod=mod $(GO) get github.com/squat/generic-device-plugin@$(DEVICE_PLUGIN_VERSION) && \
		GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp github.com/squat/generic-device-plugin
	mv $@.tmp $@

.PHONY: test-kube
test-kube: kube-tools ## The Kubernetes suite on a real one-node cluster (internal/kubetest: etcd, kube-apiserver, containerd, kubelet) it starts and removes (root)
	$(GO) test -count=1 -timeout $(KUBE_TEST_TIMEOUT) -tags kubetest -v $(KUBE_TEST_PACKAGES)

.PHONY: bench-kube
bench-kube: kube-tools ## The kubernetes target's exec round trip beside dockerd's, alternating, on the test cluster (root; dockerd at DOCKER_HOST or scripts/dockerd's)
	DOCKER_HOST=$${DOCKER_HOST:-unix:///run/sealbench-dockerd/docker.sock} \
		$(GO) test -count=1 -tags kubetest -run '^$$' -bench ExecKubeVsDockerd -benchtime 200x ./kubeengine/

$(KUBE_BUILD)/go.mod:
	@mkdir -p $(KUBE_BUILD)
	cd $(KUBE_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/kube-tools >/dev/null 2>&1
	cd $(KUBE_BUILD) && gomod=$$(GOFLAGS=-mod=mod $(GO) mod download -json k8s.io/kubernetes@$(KUBE_VERSION) | sed -n 's/^\t"GoMod": "\(.*\)",$$/\1/p') && \
		libs=$$(sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$$gomod") && [ -n "$$libs" ] && \
		for m in $$libs; do $(GO) mod edit -replace $$m=$$m@$(KUBE_LIB_VERSION) || exit 1; done
	cd $(KUBE_BUILD) && GOFLAGS=-mod=mod $(GO) get k8s.io/kubernetes/cmd/kube-apiserver@$(KUBE_VERSION) k8s.io/kubernetes/cmd/kubelet@$(KUBE_VERSION) \
		|| { rm -f go.mod; exit 1; }

$(KUBE_APISERVER) $(KUBELET): $(KUBE_BUILD)/go.mod
	@echo "building $(notdir $@) $(KUBE_VERSION) into $(dir $@) (minutes the first time)"
	cd $(KUBE_BUILD) && GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$(notdir $@)

$(RUNSC_SHIM_BUILD)/go.mod:
	@mkdir -p $(RUNSC_SHIM_BUILD)
	cd $(RUNSC_SHIM_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/runsc-shim-tools >/dev/null 2>&1
	cd $(RUNSC_SHIM_BUILD) && GOFLAGS=-mod=mod $(GO) get gvisor.dev/gvisor/shim@$(RUNSC_VERSION) || { rm -f go.mod; exit 1; }

# Two edits, each checked (so that a new version that moved either fails
# here rather than in a pod), to a vendored copy, the shim's main.go (one
# call) written here:
# - the shim sets its own oom_score_adj to -999, which needs
#   CAP_SYS_RESOURCE, which root on these machines lacks (as containerd's
#   restrict_oom_score_adj works around for runc): the constant is 0, the
#   score it inherits;
# - `start` answers containerd 2's bootstrap JSON; Debian's containerd 1.6
#   reads the shim's address alone (its task API, v2, is the shim's).
RUNSC_SHIM_EDIT_OOM := s/^\toomScoreMax = -999$$/\toomScoreMax = 0/
RUNSC_SHIM_EDIT_START := s/^\t\tdata, err := json.Marshal(\&params)$$/\t\t_ = json.Marshal; data, err := []byte(params.Address), error(nil)/
$(RUNSC_SHIM): $(RUNSC_SHIM_BUILD)/go.mod
	@echo "building containerd-shim-runsc-v1 $(RUNSC_VERSION) into $(dir $@)"
	cd $(RUNSC_SHIM_BUILD) && printf '%s\n' '// gvisor.dev/gvisor/shim (main.go): containerd-shim-runsc-v1.' 'package main' \
			'import "gvisor.dev/gvisor/shim/v1/cli"' 'func main() { cli.Main() }' > main.go && \
		rm -rf vendor && GOFLAGS=-mod=mod $(GO) mod vendor && \
		f=vendor/gvisor.dev/gvisor/pkg/shim/v1/manager.go && sed -i '$(RUNSC_SHIM_EDIT_OOM)' $$f && grep -q '^.oomScoreMax = 0$$' $$f && \
		f=vendor/github.com/containerd/containerd/v2/pkg/shim/shim.go && sed -i '$(RUNSC_SHIM_EDIT_START)' $$f && grep -q 'params.Address), error(nil)$$' $$f && \
		GOFLAGS=-mod=vendor CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ .

$(AGENT_SANDBOX_BUILD)/go.mod:
	@mkdir -p $(AGENT_SANDBOX_BUILD)
	cd $(AGENT_SANDBOX_BUILD) && rm -f go.mod go.sum && GOFLAGS= $(GO) mod init sealbench.invalid/agent-sandbox-tools >/dev/null 2>&1
	cd $(AGENT_SANDBOX_BUILD) && GOFLAGS=-mod=mod $(GO) get sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller@$(AGENT_SANDBOX_VERSION) || { rm -f go.mod; exit 1; }

# The CRDs are copied from the module (read-only in the module cache) beside
# the controller, so that the fixture needs no module cache.
$(AGENT_SANDBOX_CONTROLLER): $(AGENT_SANDBOX_BUILD)/go.mod
	@echo "building agent-sandbox-controller $(AGENT_SANDBOX_VERSION) into $(dir $@)"
	cd $(AGENT_SANDBOX_BUILD) && GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
	cd $(AGENT_SANDBOX_BUILD) && src=$$(GOFLAGS=-mod=mod $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox) && \
		rm -rf $(AGENT_SANDBOX_PREFIX)/crds && mkdir -p $(AGENT_SANDBOX_PREFIX)/crds && \
		cp "$$src"/k8s/crds/*.yaml $(AGENT_SANDBOX_PREFIX)/crds/ && chmod 644 $(AGENT_SANDBOX_PREFIX)/crds/*.yaml
	mv $@.tmp $@
