package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/sealbench/sealbench/internal/sockpath"
	"github.com/sealbench/sealbench/kubeengine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/runs"
)

// backend is the kubernetes target's runs.Backend. A run's pods and
// images are ledger entries on its kube-engine's endpoint, and its
// NetworkPolicy a kubeObject entry; none of them goes when the
// kube-engine does, so teardown removes them itself: the objects through
// the API server, the pods and images through a kube-engine of its own
// (package kubeengine, in this process, on the run's record), which runs
// the same code the run's did. Directories, sockets and the kube-engine's
// process are the generic code's.
type backend struct{}

var _ runs.Backend = backend{}

func (backend) Remove(ctx context.Context, runDir string, e manifests.LedgerEntry) error {
	switch {
	case e.Kind == manifests.ResourceKubeObject:
		c, err := clusterOf(runDir, e.Target)
		if err != nil {
			return err
		}
		return c.remove(ctx, e.Key)
	case e.Kind == manifests.ResourceContainer || e.Kind == manifests.ResourceImage:
		return onEngine(ctx, runDir, e, func(e manifests.LedgerEntry) error { return runs.RemoveOnEngine(ctx, e) })
	}
	return runs.ErrGeneric
}

func (backend) Exists(ctx context.Context, runDir string, e manifests.LedgerEntry) (ok bool, detail string, err error) {
	switch {
	case e.Kind == manifests.ResourceKubeObject:
		c, err := clusterOf(runDir, e.Target)
		if err != nil {
			return false, "", err
		}
		return c.exists(ctx, e.Key)
	case e.Kind == manifests.ResourceContainer || e.Kind == manifests.ResourceImage:
		err = onEngine(ctx, runDir, e, func(e manifests.LedgerEntry) error {
			ok, _, err = runs.Exists(ctx, "/nonexistent", e)
			return err
		})
		// Where the run's Engine is, not the one this check used.
		return ok, "on " + e.Engine + " (the cluster, through a kube-engine)", err
	}
	return false, "", runs.ErrGeneric
}

// Audit lists the pods and NetworkPolicies labelled sealbench.run on the
// cluster of KUBECONFIG (or ~/.kube/config; the commands' --kubeconfig
// sets it), in every namespace. With no kubeconfig at all there is no
// cluster to ask: a note, not an error.
func (backend) Audit(ctx context.Context, run string) ([]runs.Resource, []string, error) {
	if !haveKubeconfig() {
		return nil, []string{"kubernetes: no kubeconfig (KUBECONFIG, ~/.kube/config or --kubeconfig): no cluster was asked"}, nil
	}
	c, err := connect(kubeengine.Config{})
	if err != nil {
		return nil, nil, err
	}
	rs, err := c.labelled(ctx, run, "")
	return rs, nil, err
}

// haveKubeconfig reports whether client-go's default rules find a file.
func haveKubeconfig() bool {
	for _, p := range clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence() {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// clusterOf reaches the cluster of the run in runDir's target, as its
// record says; without one (an entry the audit found), the default
// kubeconfig's.
func clusterOf(runDir, target string) (*cluster, error) {
	c, _, err := readRecord(runDir, target)
	if err != nil {
		return nil, err
	}
	return connect(c)
}

// onEngine runs f on e with its Engine a kube-engine of this process's,
// on the run's record: the run's own may be gone, and its pods and images
// are not.
func onEngine(ctx context.Context, runDir string, e manifests.LedgerEntry, f func(manifests.LedgerEntry) error) error {
	cfg, ok, err := readRecord(runDir, e.Target)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: the run has no %s to say which cluster holds it", e.Name(), recordFile(e.Target))
	}
	dir, err := os.MkdirTemp("", "sealbench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Socket = filepath.Join(dir, "engine.sock")
	srv, err := kubeengine.New(cfg)
	if err != nil {
		return err
	}
	ln, err := sockpath.ListenPrivate("the teardown's kube-engine", cfg.Socket)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	defer func() {
		hs.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "sealbench: the teardown's kube-engine: %v\n", err)
		}
	}()
	e.Target, e.Engine = "", "unix://"+cfg.Socket
	return f(e)
}
