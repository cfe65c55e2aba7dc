package fencing

import (
	"context"
	"fmt"
	"math"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// tokenHolder is the holderIdentity written on the token lease, for people
// reading it.
const tokenHolder = "fencing-controller"

// nextToken takes the next fence token: a compare-and-swap increment of
// spec.leaseTransitions of the token lease (TokenLeaseNamespace /
// TokenLeaseName), created with 1 if missing. The API applies an update only
// if the lease's resourceVersion is still the one read, so every token is
// handed out once and each is larger than every token handed out before it,
// across controller restarts and concurrent controllers. On a conflict it
// reads again; it gives up only when ctx ends or the API fails otherwise.
func nextToken(ctx context.Context, client kubernetes.Interface, now metav1.MicroTime) (int64, error) {
	leases := client.CoordinationV1().Leases(TokenLeaseNamespace)
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("taking a fence token: %w", err)
		}
		lease, err := leases.Get(ctx, TokenLeaseName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: TokenLeaseNamespace, Name: TokenLeaseName},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To(tokenHolder), LeaseTransitions: ptr.To[int32](1), RenewTime: &now,
				},
			}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			switch {
			case err == nil:
				return 1, nil
			case apierrors.IsAlreadyExists(err):
				continue // another controller created it first: increment theirs
			}
			return 0, fmt.Errorf("creating fence token lease %s/%s: %w", TokenLeaseNamespace, TokenLeaseName, err)
		}
		if err != nil {
			return 0, fmt.Errorf("reading fence token lease %s/%s: %w", TokenLeaseNamespace, TokenLeaseName, err)
		}
		cur := int32(0)
		if lease.Spec.LeaseTransitions != nil {
			cur = max(*lease.Spec.LeaseTransitions, 0)
		}
		if cur == math.MaxInt32 {
			return 0, fmt.Errorf("fence token lease %s/%s: counter exhausted at %d", TokenLeaseNamespace, TokenLeaseName, cur)
		}
		next := cur + 1
		lease.Spec.LeaseTransitions = &next
		lease.Spec.HolderIdentity = ptr.To(tokenHolder)
		lease.Spec.RenewTime = &now
		// lease carries the resourceVersion read above: the compare.
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		switch {
		case err == nil:
			return int64(next), nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue
		}
		return 0, fmt.Errorf("incrementing fence token lease %s/%s: %w", TokenLeaseNamespace, TokenLeaseName, err)
	}
}
