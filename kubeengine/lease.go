package kubeengine

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sealbench/sealbench/manifests"
)

// The node's Lease: one run samples on a node at a time, whichever host
// started it. Its holder is the run (Config.RunID): the run's runner
// already samples one at a time, and a run may keep several Sandboxes up
// at once (the conformance suite does). The first pod of the run takes it,
// it is renewed while the run has pods here, and deleted with its last
// one, so a kube-engine that dies holds the node for leaseSeconds at most.
const (
	leaseSeconds = 30
	leaseRenew   = 10 * time.Second
	leasePoll    = 250 * time.Millisecond
)

// nodeHold counts a Server's pods that hold the node's Lease for its run.
type nodeHold struct {
	sync.Mutex
	holds   int
	release func() // stops renewing and releases; set while holds > 0
}

// holdNode takes the node's Lease for the run when no pod of the run here
// holds it yet (waiting while another run has it), and returns the
// function that lets go of this pod's hold (idempotent): the Lease is
// released with the run's last hold.
func (s *Server) holdNode(ctx context.Context) (func(), error) {
	h := &s.lease
	h.Lock()
	defer h.Unlock()
	if h.holds == 0 {
		release, err := s.acquireLease(ctx, s.c.RunID)
		if err != nil {
			return nil, err
		}
		h.release = release
	}
	h.holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.Lock()
			defer h.Unlock()
			if h.holds--; h.holds == 0 {
				h.release()
				h.release = nil
			}
		})
	}, nil
}

// releaseNode lets go of every hold: the kube-engine is stopping.
func (s *Server) releaseNode() {
	h := &s.lease
	h.Lock()
	defer h.Unlock()
	if h.holds > 0 {
		h.release()
		h.holds, h.release = 0, nil
	}
}

// LeaseName is the Lease of a node.
func LeaseName(node string) string { return "sealbench-node-" + node }

// acquireLease waits until holder holds the node's Lease, and returns the
// function that stops renewing it and releases it (idempotent).
func (s *Server) acquireLease(ctx context.Context, holder string) (func(), error) {
	leases := s.client.CoordinationV1().Leases(s.c.Namespace)
	name := LeaseName(s.c.Node)
	for {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.c.Namespace, Labels: map[string]string{manifests.RunLabel: holder}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr(int32(leaseSeconds)),
					AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			if err == nil {
				return s.renewLease(holder), nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating Lease %s/%s: %w", s.c.Namespace, name, err)
			}
		case err != nil:
			return nil, fmt.Errorf("getting Lease %s/%s: %w", s.c.Namespace, name, err)
		case free(l, holder):
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, ptr(int32(leaseSeconds))
			l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
			// The run label says whose it is, so that the audit finds one
			// a crashed kube-engine left, as it finds its pods.
			if l.Labels == nil {
				l.Labels = map[string]string{}
			}
			l.Labels[manifests.RunLabel] = holder
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			if err == nil {
				return s.renewLease(holder), nil
			}
			if !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("taking Lease %s/%s: %w", s.c.Namespace, name, err)
			}
		}
		select {
		case <-ctx.Done():
			h := "?"
			if l != nil && l.Spec.HolderIdentity != nil {
				h = *l.Spec.HolderIdentity
			}
			return nil, fmt.Errorf("waiting for node %s's Lease %s/%s (held by %s): %w", s.c.Node, s.c.Namespace, name, h, ctx.Err())
		case <-time.After(leasePoll):
		}
	}
}

// free says whether holder may take l: no one holds it, holder does, or
// its holder stopped renewing it.
func free(l *coordinationv1.Lease, holder string) bool {
	h := l.Spec.HolderIdentity
	if h == nil || *h == "" || *h == holder || l.Spec.RenewTime == nil {
		return true
	}
	d := time.Duration(leaseSeconds) * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return time.Since(l.Spec.RenewTime.Time) > d
}

// renewLease renews holder's Lease until the returned function is called
// (which releases it) or another holder has it.
func (s *Server) renewLease(holder string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leases := s.client.CoordinationV1().Leases(s.c.Namespace)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(leaseRenew):
			}
			l, err := leases.Get(ctx, LeaseName(s.c.Node), metav1.GetOptions{})
			if apierrors.IsNotFound(err) || err == nil && (l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder) {
				return
			}
			if err != nil {
				continue
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	}()
	return func() {
		cancel()
		<-done
		s.releaseLease(context.Background(), holder)
	}
}

// releaseLease deletes the node's Lease if holder holds it.
func (s *Server) releaseLease(ctx context.Context, holder string) error {
	leases := s.client.CoordinationV1().Leases(s.c.Namespace)
	name := LeaseName(s.c.Node)
	for {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("getting Lease %s/%s: %w", s.c.Namespace, name, err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			return nil
		}
		err = leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("releasing Lease %s/%s: %w", s.c.Namespace, name, err)
		}
	}
}

// releaseIfLast releases the run's Lease on the node when no pod of the
// run is left in the namespace: for a kube-engine that holds none itself
// (a teardown's, after the run's own is gone).
func (s *Server) releaseIfLast(ctx context.Context) error {
	pods, err := s.client.CoreV1().Pods(s.c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: manifests.RunLabel + "=" + s.c.RunID})
	if err != nil {
		return fmt.Errorf("listing the run's pods: %w", err)
	}
	if len(pods.Items) > 0 {
		return nil
	}
	return s.releaseLease(ctx, s.c.RunID)
}
