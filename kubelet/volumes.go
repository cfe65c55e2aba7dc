package kubelet

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// VolumeID names the RWO volume behind a pod's persistentVolumeClaim volume:
// "<namespace>.<claimName>". The volume's VolumeAttachment has this name, so
// attaching is a create that succeeds only while the volume is attached
// nowhere (PS-15); the attach/detach controller uses the same convention.
func VolumeID(namespace, claim string) string { return namespace + "." + claim }

// PodVolumes lists the IDs of pod's RWO volumes (its persistentVolumeClaim
// volumes), in spec order.
func PodVolumes(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, VolumeID(pod.Namespace, v.PersistentVolumeClaim.ClaimName))
		}
	}
	return out
}

// attachedVolumes decides whether pod's containers may start on node: every
// RWO volume must be attached to node (PS-15: a pod runs only once its
// volume is attached to its node). It returns the volumes with their tokens,
// or why it must wait.
func attachedVolumes(lister storagelisters.VolumeAttachmentLister, node string, pod *corev1.Pod) ([]AttachedVolume, string) {
	ids := PodVolumes(pod)
	if len(ids) == 0 {
		return nil, ""
	}
	if lister == nil {
		return nil, "waiting for volume attachments to be known"
	}
	out := make([]AttachedVolume, 0, len(ids))
	for _, id := range ids {
		va, err := lister.Get(id)
		if err != nil {
			return nil, fmt.Sprintf("waiting for volume %s to be attached to node %s", id, node)
		}
		if why := attachedHere(va, node); why != "" {
			return nil, why
		}
		rv, err := strconv.ParseInt(va.ResourceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Sprintf("volume %s: attachment has resourceVersion %q, not a number", id, va.ResourceVersion)
		}
		out = append(out, AttachedVolume{Volume: id, Token: rv})
	}
	return out, ""
}

// attachedHere says why va does not attach its volume to node ("" when it
// does).
func attachedHere(va *storagev1.VolumeAttachment, node string) string {
	switch {
	case va.DeletionTimestamp != nil:
		return fmt.Sprintf("volume %s is being detached", va.Name)
	case va.Spec.NodeName != node:
		return fmt.Sprintf("volume %s is attached to node %s, not %s (Multi-Attach: RWO)", va.Name, va.Spec.NodeName, node)
	case !va.Status.Attached:
		return fmt.Sprintf("waiting for volume %s to finish attaching to node %s", va.Name, node)
	}
	return ""
}

// volumeAttachmentGetter is a VolumeAttachmentLister that gets each
// attachment from the API by name (Config.GetVolumeAttachments): what a
// node may do under the Node authorizer. It cannot list.
type volumeAttachmentGetter struct{ k *Kubelet }

// List is refused: a node may not list attachments.
func (g volumeAttachmentGetter) List(labels.Selector) ([]*storagev1.VolumeAttachment, error) {
	return nil, fmt.Errorf("listing volume attachments: a node gets them by name only")
}

// Get fetches the attachment named name from the API.
func (g volumeAttachmentGetter) Get(name string) (*storagev1.VolumeAttachment, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.k.cfg.RequestTimeout)
	defer cancel()
	return g.k.cfg.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}

// lazyAttachments is the kubelet's VolumeAttachment lister when it watches
// them (not Config.GetVolumeAttachments): the informer starts the first time
// a worker asks for an attachment, that is once a pod with an RWO volume is
// on the node. Until it has listed, an attachment is not found, so the
// worker waits; its handler wakes every worker on each attachment it lists
// or sees change, as before. A node that never runs such a pod keeps no
// watch of every attachment in the cluster, and no informer's goroutines:
// about a third of an idle kubelet's, at thousands of nodes.
type lazyAttachments struct {
	k       *Kubelet
	ctx     context.Context // the kubelet's Run
	factory informers.SharedInformerFactory

	once   sync.Once
	lister storagelisters.VolumeAttachmentLister
	err    error
}

var _ storagelisters.VolumeAttachmentLister = (*lazyAttachments)(nil)

// start starts the informer once, and returns its lister.
func (l *lazyAttachments) start() (storagelisters.VolumeAttachmentLister, error) {
	l.once.Do(func() {
		inf := l.factory.Storage().V1().VolumeAttachments()
		wakeAll := func(any) { l.k.wakeAll() }
		if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: wakeAll, UpdateFunc: func(_, o any) { wakeAll(o) }, DeleteFunc: wakeAll,
		}); err != nil {
			l.err = fmt.Errorf("watching volume attachments for %s: %w", l.k.cfg.NodeName, err)
			return
		}
		l.lister = inf.Lister()
		l.k.log.Info("watching volume attachments", "reason", "a pod with an RWO volume")
		l.factory.Start(l.ctx.Done()) // a no-op once Run is shutting the factory down
	})
	return l.lister, l.err
}

// List lists the attachments the informer holds.
func (l *lazyAttachments) List(sel labels.Selector) ([]*storagev1.VolumeAttachment, error) {
	lister, err := l.start()
	if err != nil {
		return nil, err
	}
	return lister.List(sel)
}

// Get returns the named attachment as the informer holds it.
func (l *lazyAttachments) Get(name string) (*storagev1.VolumeAttachment, error) {
	lister, err := l.start()
	if err != nil {
		return nil, err
	}
	return lister.Get(name)
}
