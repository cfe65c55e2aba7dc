package kubelet

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runLease renews the node's heart-beat Lease in kube-node-lease every
// LeaseRenew of clock time.
func (k *Kubelet) runLease(ctx context.Context) {
	for {
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			k.log.Debug("lease not renewed", "err", err)
		}
		t := k.clock.NewTimer(k.cfg.LeaseRenew)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// renewLease writes the Lease's renew time. As upstream's lease controller
// does, it updates the copy it wrote last, reading the Lease only when it has
// none or the update conflicts (someone else wrote it) or finds it gone: a
// renewal costs one write, not a linearizable read and a write, which
// matters when thousands of kubelets renew.
func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.cfg.Client.CoordinationV1().Leases(coordinationv1NodeLeaseNamespace)
	rctx, cancel := k.requestCtx(ctx)
	defer cancel()
	now := metav1.NewMicroTime(k.clock.Now())
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(k.cfg.NodeName),
		LeaseDurationSeconds: ptr.To(int32(k.cfg.LeaseDuration / time.Second)),
		RenewTime:            &now,
	}
	if last := k.lastLease; last != nil {
		lease := last.DeepCopy()
		spec.AcquireTime = lease.Spec.AcquireTime
		lease.Spec = spec
		updated, err := leases.Update(rctx, lease, metav1.UpdateOptions{})
		if err == nil {
			k.lastLease = updated
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			// Keep the copy, as upstream's lease controller does: if the
			// failed write did land, the next one conflicts and reads;
			// otherwise it needs no read at all. Dropping the copy on
			// every timeout made an overloaded store answer a read and a
			// write per renewal just when it could least afford them.
			return fmt.Errorf("renewing lease of %s: %w", k.cfg.NodeName, err)
		}
		k.lastLease = nil
		spec.AcquireTime = nil
	}
	lease, err := leases.Get(rctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		spec.AcquireTime = &now
		created, err := leases.Create(rctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: coordinationv1NodeLeaseNamespace},
			Spec:       spec,
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating lease of %s: %w", k.cfg.NodeName, err)
		}
		k.lastLease = created
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading lease of %s: %w", k.cfg.NodeName, err)
	}
	spec.AcquireTime = lease.Spec.AcquireTime
	lease.Spec = spec
	updated, err := leases.Update(rctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease of %s: %w", k.cfg.NodeName, err)
	}
	k.lastLease = updated
	return nil
}

// coordinationv1NodeLeaseNamespace holds the node leases.
const coordinationv1NodeLeaseNamespace = "kube-node-lease"
