package fencing

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// confirmedFence is the only licence in this package to force delete pods
// and break volume attachments. The one way to get one is confirmFence, on
// a Node object read back from the API that carries FencedCondition True;
// that condition is written (recordFence) only after every agent confirmed
// the fence. So the order PS-14 demands — fence, confirm, record, and only
// then force delete — holds by construction: forceDeletePods and
// breakAttachments take a confirmedFence, and nothing else force deletes.
type confirmedFence struct {
	node *corev1.Node
	recordedFence
}

// confirmFence returns the licence of node, an object the API returned,
// when it records a confirmed fence.
func confirmFence(node *corev1.Node) (confirmedFence, bool) {
	rf, ok := recordedFenceOf(node)
	if !ok {
		return confirmedFence{}, false
	}
	return confirmedFence{node: node, recordedFence: rf}, true
}

// errNotClear reports a fenced node that still has pods or attachments
// after a pass, e.g. a pod re-created under the same name: the node is
// synced again.
var errNotClear = errors.New("fenced node not clear yet")

// clearNode force deletes every pod bound to f's node and breaks every
// volume attachment to it, listing both from the API (not a cache) so that
// nothing is missed. It returns the pods it deleted ("namespace/name") and
// nil once neither pods nor attachments remain.
func (c *Controller) clearNode(ctx context.Context, f confirmedFence) ([]string, error) {
	deleted, podErr := c.forceDeletePods(ctx, f)
	vaErr := c.breakAttachments(ctx, f)
	return deleted, errors.Join(podErr, vaErr)
}

// forceDeletePods force deletes (grace 0, UID precondition) every pod bound
// to f's node: the node is fenced, so none of their processes can run or
// write any more and replacements may start at once. Each deletion gets an
// Event on the pod.
func (c *Controller) forceDeletePods(ctx context.Context, f confirmedFence) ([]string, error) {
	name := f.node.Name
	list, err := c.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods of fenced node %s: %w", name, err)
	}
	var deleted []string
	var errs []error
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName != name {
			continue
		}
		uid := pod.UID
		err := c.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
		ref := pod.Namespace + "/" + pod.Name
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			// A new pod took the name: if it is bound here too, the next
			// pass deletes it.
			errs = append(errs, fmt.Errorf("pod %s was replaced: %w", ref, errNotClear))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("force deleting pod %s of fenced node %s: %w", ref, name, err))
			continue
		}
		deleted = append(deleted, ref)
		c.log.Warn("pod force deleted, node fenced", "pod", ref, "uid", uid, "node", name, "token", f.token)
		c.event(podRef(pod), corev1.EventTypeWarning, EventForceDeleted,
			fmt.Sprintf("Pod force deleted: node %s is fenced (token %d); its processes cannot run any more", name, f.token))
	}
	return deleted, errors.Join(errs...)
}

// breakAttachments deletes every storage.k8s.io/v1 VolumeAttachment to f's
// node, so its RWO volumes can attach elsewhere. The storage agent has
// already cut the node off those volumes (PS-15: firewall first, then break
// the attachment).
func (c *Controller) breakAttachments(ctx context.Context, f confirmedFence) error {
	name := f.node.Name
	list, err := c.cfg.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing volume attachments of fenced node %s: %w", name, err)
	}
	var errs []error
	for i := range list.Items {
		va := &list.Items[i]
		if va.Spec.NodeName != name {
			continue
		}
		uid := va.UID
		err := c.cfg.Client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid},
		})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("volume attachment %s was replaced: %w", va.Name, errNotClear))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("breaking volume attachment %s of fenced node %s: %w", va.Name, name, err))
			continue
		}
		pv := ""
		if va.Spec.Source.PersistentVolumeName != nil {
			pv = *va.Spec.Source.PersistentVolumeName
		}
		c.log.Warn("volume attachment broken, node fenced", "attachment", va.Name, "volume", pv, "node", name, "token", f.token)
		c.event(nodeRef(f.node), corev1.EventTypeWarning, EventAttachmentBroken,
			fmt.Sprintf("Volume attachment %s (volume %q) deleted: node %s is fenced (token %d)", va.Name, pv, name, f.token))
	}
	return errors.Join(errs...)
}
