package kubeengine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node's Lease: one Sandbox runs on a node at a time, whichever run
// or host started it. Its holder is the pod; it is renewed while the pod
// lives and deleted when the pod is removed, so a kube-engine that dies
// holds the node for leaseSeconds at most.
const (
	leaseSeconds = 30
	leaseRenew   = 10 * time.Second
	leasePoll    = 250 * time.Millisecond
)

// LeaseName is the Lease of a node.
func LeaseName(node string) string { return "sealbench-node-" + node }

// acquireLease waits until holder holds the node's Lease, and returns the
// function that stops renewing it and releases it (idempotent).
func (s *Server) acquireLease(ctx context.Context, holder string, podMade *atomic.Bool) (func(), error) {
	leases := s.client.CoordinationV1().Leases(s.c.Namespace)
	name := LeaseName(s.c.Node)
	for {
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.c.Namespace},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr(int32(leaseSeconds)),
					AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			if err == nil {
				return s.renewLease(holder, podMade), nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("creating Lease %s/%s: %w", s.c.Namespace, name, err)
			}
		case err != nil:
			return nil, fmt.Errorf("getting Lease %s/%s: %w", s.c.Namespace, name, err)
		case free(l, holder):
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, ptr(int32(leaseSeconds))
			l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			if err == nil {
				return s.renewLease(holder, podMade), nil
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
// (which releases it), another holder has it, or holder's pod is gone
// after podMade (a teardown through the API removed it).
func (s *Server) renewLease(holder string, podMade *atomic.Bool) func() {
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
			_, err := s.client.CoreV1().Pods(s.c.Namespace).Get(ctx, holder, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && podMade.Load() {
				s.releaseLease(ctx, holder)
				return
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
