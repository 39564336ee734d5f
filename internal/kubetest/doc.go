// Package kubetest runs a real one-node Kubernetes cluster on this machine
// for a test binary: Debian's etcd, kube-apiserver and the kubelet that
// `make kube-tools` builds (internal/toolcache), and Debian's containerd
// with its CRI plugin and runc, each in a private configuration under one
// temporary directory, on loopback ports chosen free. One cluster serves a
// whole test binary (Shared, stopped by Main in TestMain), never one per
// test: it takes seconds to start and stop.
//
// It lives in internal/ rather than beside the kubernetes target
// (provision/kubernetes) because it is not part of any target: the
// target's tests, the host's end-to-end tests and this package's own
// proof all run on it, and none of the bundle's binaries may link
// client-go (the depcheck tests hold that).
//
// What it leaves running is what a kubelet needs and no more: no
// controller manager, scheduler or kube-proxy. The pods' network is none:
// containerd's CNI configuration names nonet (./nonet, built at Start), a
// test-only plugin that leaves a pod's network namespace with lo alone
// (brought up by Debian's loopback plugin), so a pod that does not ask for
// the host's network reaches nothing outside itself, and the node is
// Ready. Pods name their node, tolerate every taint and mount no
// service-account token (Start creates the default namespace's "default"
// service account, which admission looks up). The fixture plays the
// cloud controller (the node's loopback address) and runs a device plugin
// that offers /dev/fuse as FUSEResource, the only way short of privileged
// for a container to open it. etcd and the kubelet take only the API
// server's client certificate, the API server only its tokens.
//
// Stop removes everything the cluster made: its processes and the
// containers' shims, the mounts under its directory (the pods' network
// namespaces among them), CNI's cached results, the cgroups under its
// own cgroup root in every hierarchy, the kubelet's KUBE-* iptables chains
// and the kernel settings the kubelet changes, put back; Leftovers says
// what is left, if anything. A cluster whose test binary died is swept by
// the next Start. docs/design/kubernetes.md has the details and figures.
//
// It runs on Linux only; elsewhere the package is this doc.
package kubetest
