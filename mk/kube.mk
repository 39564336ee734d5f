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

.PHONY: kube-tools
kube-tools: $(KUBE_APISERVER) $(KUBELET) ## Build kube-apiserver and the kubelet (v1.34.12) into ~/.cache/sealbench/tools, from the Go module proxy; install etcd, containerd, runc and the CNI plugins
	@$(MAKE) --no-print-directory deps TEST_PACKAGES="$(KUBE_PACKAGES)"

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
