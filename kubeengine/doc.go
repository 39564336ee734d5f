// Package kubeengine is `sealbench kube-engine`: a host-side process that
// serves, on a 0600 unix socket, the Engine API calls sealbench makes
// (runner/, engine/, provisiontest/), each mapped to one node of a
// Kubernetes cluster through client-go, so that the runner, which speaks
// only the Engine API and links no k8s.io, can drive pods
// (docs/design/kubernetes.md, "How the runner reaches pods").
//
// # The mapping
//
// A container is a pod: create keeps the request in memory; start takes
// the node's Lease for the run (one run per node at a time, across runs and
// hosts), creates the pod bound to the node, and waits for it to run; the
// pod carries the create request in an annotation, so that the pod is
// the state and a later kube-engine can inspect, wait for and remove it.
// An exec is the pod's exec subresource, wrapped in /bin/sh to give it
// what the subresource lacks (user, working directory, environment, the
// pid); its stream is spliced to the hijacked Engine connection in
// stdcopy frames. Images are loaded into the node's containerd with ctr,
// and inspected and removed (for teardown) through CRI. The calls are
// routed by engineapi.Router, the stand-in's too; every other Engine call
// answers 501 naming it, so a runner that needs more fails loudly.
package kubeengine
