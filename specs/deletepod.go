package specs

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ForceWarning is what the user interface says before a force deletion
// (PS-16).
const ForceWarning = `Warning: a force deletion removes the pod from the API at once, without waiting
for its kubelet to confirm that its containers have stopped. If the node is only
partitioned, its processes may keep running, and a controller may start a
replacement next to them: two copies of a pet, two writers of one volume.
Fence the node first, or make sure it is really gone.`

// ErrNeedsConfirmation: a force deletion was asked for without the user's
// confirmation (PS-16).
var ErrNeedsConfirmation = errors.New("a force deletion needs confirmation")

// ErrPodNotFound: the pod to delete does not exist.
var ErrPodNotFound = errors.New("pod not found")

// DeletePodOptions say how DeletePod deletes.
type DeletePodOptions struct {
	// Force deletes at once (grace period 0).
	Force bool
	// Confirmed is the user's confirmation of a force deletion, given after
	// the warning.
	Confirmed bool
	// GracePeriodSeconds, when not nil, is the grace of a graceful deletion;
	// nil uses the pod's own (GP-6).
	GracePeriodSeconds *int64
}

// DeletePod is `podsafe delete pod`: a graceful deletion, or a force
// deletion that first writes ForceWarning to warn and refuses with
// ErrNeedsConfirmation unless o.Confirmed (PS-16).
func DeletePod(ctx context.Context, cs kubernetes.Interface, namespace, name string, o DeletePodOptions, warn io.Writer) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: o.GracePeriodSeconds}
	if o.Force {
		if o.GracePeriodSeconds != nil && *o.GracePeriodSeconds > 0 {
			return fmt.Errorf("a force deletion has grace period 0; it cannot have grace period %d", *o.GracePeriodSeconds)
		}
		fmt.Fprintln(warn, ForceWarning)
		if !o.Confirmed {
			return fmt.Errorf("not deleting pod %s/%s: %w", namespace, name, ErrNeedsConfirmation)
		}
		opts.GracePeriodSeconds = new(int64)
	}
	err := cs.CoreV1().Pods(namespace).Delete(ctx, name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s/%s: %w", namespace, name, ErrPodNotFound)
	case err != nil:
		return fmt.Errorf("deleting pod %s/%s: %w", namespace, name, err)
	}
	return nil
}
