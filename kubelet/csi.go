package kubelet

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ControllerManagedAttachAnnotation on a Node tells Kubernetes' attach/detach
// controller that it attaches and detaches the node's volumes (the real
// kubelet sets it when it registers, unless told to attach volumes itself).
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// CSIAttachmentName is the name Kubernetes' CSI attacher gives the
// VolumeAttachment of a CSI volume on a node: "csi-" and the SHA-256 of the
// volume handle, the driver and the node. There is one per (volume, node)
// pair, so it is the attach/detach controller, not the name, that keeps an
// RWO volume on one node.
func CSIAttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// CSIUniqueVolumeName is the name under which a node reports a CSI volume in
// status.volumesInUse and the attach/detach controller tracks it:
// "kubernetes.io/csi/DRIVER^HANDLE".
func CSIUniqueVolumeName(driver, handle string) string {
	return "kubernetes.io/csi/" + driver + "^" + handle
}

// csiVolume is one persistentVolumeClaim volume of a pod, resolved to its
// CSI persistent volume.
type csiVolume struct {
	claim, handle, driver string
}

// csiVolumes resolves pod's claims to their bound CSI persistent volumes,
// as a node may under the Node authorizer (it gets the claims and volumes
// of its own pods). It says why it must wait when a claim is not bound yet
// or its volume is not a CSI volume.
func (k *Kubelet) csiVolumes(pod *corev1.Pod) ([]csiVolume, string) {
	var out []csiVolume
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		claim := v.PersistentVolumeClaim.ClaimName
		ctx, cancel := context.WithTimeout(context.Background(), k.cfg.RequestTimeout)
		pvc, err := k.cfg.Client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			cancel()
			return nil, fmt.Sprintf("waiting for claim %s/%s: %v", pod.Namespace, claim, err)
		}
		if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
			cancel()
			return nil, fmt.Sprintf("waiting for claim %s/%s to be bound", pod.Namespace, claim)
		}
		pv, err := k.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		cancel()
		if err != nil {
			return nil, fmt.Sprintf("waiting for volume %s of claim %s/%s: %v", pvc.Spec.VolumeName, pod.Namespace, claim, err)
		}
		if pv.Spec.CSI == nil {
			return nil, fmt.Sprintf("volume %s of claim %s/%s is not a CSI volume", pv.Name, pod.Namespace, claim)
		}
		out = append(out, csiVolume{claim: claim, handle: pv.Spec.CSI.VolumeHandle, driver: pv.Spec.CSI.Driver})
	}
	return out, ""
}

// csiAttachedVolumes decides, with Config.CSIAttachments, whether pod's
// containers may start: as the real kubelet's volume manager does, every
// volume is first reported in the node's status.volumesInUse (so the
// attach/detach controller will not detach it from a healthy node while it
// is used), then it must be attached here by its CSI VolumeAttachment. The
// volumes keep the handle as their ID (the storage's name for them) and the
// attachment's resourceVersion as their token.
func (k *Kubelet) csiAttachedVolumes(uid types.UID, pod *corev1.Pod) ([]AttachedVolume, string) {
	// A bound claim's volume never changes: it is resolved once per pod,
	// not on every pass of its worker.
	k.mu.Lock()
	vols, resolved := k.csiResolved[uid]
	k.mu.Unlock()
	if !resolved {
		var wait string
		if vols, wait = k.csiVolumes(pod); wait != "" {
			return nil, wait
		}
		k.mu.Lock()
		if k.csiResolved == nil {
			k.csiResolved = map[types.UID][]csiVolume{}
		}
		k.csiResolved[uid] = vols
		k.mu.Unlock()
	}
	if len(vols) == 0 {
		return nil, ""
	}
	names := make([]string, len(vols))
	for i, v := range vols {
		names[i] = CSIUniqueVolumeName(v.driver, v.handle)
	}
	if missing := k.markInUse(uid, names); missing != "" {
		return nil, fmt.Sprintf("waiting for volume %s to be reported in use by node %s", missing, k.cfg.NodeName)
	}
	out := make([]AttachedVolume, 0, len(vols))
	for _, v := range vols {
		va, err := k.vaLister.Get(CSIAttachmentName(v.handle, v.driver, k.cfg.NodeName))
		if err != nil {
			return nil, fmt.Sprintf("waiting for volume %s to be attached to node %s", v.handle, k.cfg.NodeName)
		}
		if why := attachedHere(va, k.cfg.NodeName); why != "" {
			return nil, why
		}
		rv, err := strconv.ParseInt(va.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Sprintf("volume %s: attachment has resourceVersion %q, not a number", v.handle, va.ResourceVersion)
		}
		out = append(out, AttachedVolume{Volume: v.handle, Token: rv})
	}
	return out, ""
}

// markInUse records that pod uid uses the volumes names and returns the
// first of them the node's status does not report in use yet ("" when all
// are), asking for the status to be posted now.
func (k *Kubelet) markInUse(uid types.UID, names []string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inUse == nil {
		k.inUse = map[types.UID][]string{}
	}
	if !slices.Equal(k.inUse[uid], names) {
		k.inUse[uid] = names
	}
	for _, n := range names {
		if !k.reportedInUse[n] {
			k.kickStatus()
			return n
		}
	}
	return ""
}

// releaseInUse forgets the volumes pod uid used: its worker is done, its
// containers are gone.
func (k *Kubelet) releaseInUse(uid types.UID) {
	delete(k.csiResolved, uid)
	if _, ok := k.inUse[uid]; ok {
		delete(k.inUse, uid)
		k.kickStatus()
	}
}

// volumesInUse is what the node's status reports in use: every volume of a
// pod whose worker runs. Called with k.mu held.
func (k *Kubelet) volumesInUse() []corev1.UniqueVolumeName {
	seen := map[string]bool{}
	var out []corev1.UniqueVolumeName
	for _, names := range k.inUse {
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, corev1.UniqueVolumeName(n))
			}
		}
	}
	slices.Sort(out)
	return out
}

// kickStatus asks runNode to post the node's status now. Called with k.mu
// held.
func (k *Kubelet) kickStatus() {
	select {
	case k.statusKick <- struct{}{}:
	default:
	}
}
