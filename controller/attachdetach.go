package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Attacher is the spec.attacher of every VolumeAttachment podsafe writes.
const Attacher = "podsafe.io/storage"

// volumeIndex indexes pods by the IDs of their RWO volumes.
const volumeIndex = "volume"

// AttachDetachConfig configures an AttachDetach controller. Zero values mean
// defaults.
type AttachDetachConfig struct {
	// Client talks to the API as the attach/detach controller identity.
	// Required.
	Client kubernetes.Interface
	// Clock paces retries (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Workers is how many volumes are reconciled at once (default 4).
	Workers int

	_ struct{}
}

func (c *AttachDetachConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c AttachDetachConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: attach/detach: Client is nil; pass a clientset for the attach/detach controller identity", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: attach/detach: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// AttachDetach attaches RWO volumes (a pod's persistentVolumeClaim volumes)
// to the nodes of the pods that use them, one node at a time (PS-15):
//
//   - a volume is attached by creating the VolumeAttachment named after the
//     volume (VolumeID), which succeeds only while no attachment of it exists
//     anywhere, then marking it attached;
//   - a pod on another node waits: the kubelet starts nothing until the
//     attachment names its node;
//   - an attachment is detached (deleted) only once no pod object using the
//     volume on that node exists any more, checked with a linearizable list
//     from the API, never only from the informer cache: the old pod's
//     deletion has completed, so its containers are confirmed dead.
//
// The fencing controller may also break the attachment of a fenced node.
type AttachDetach struct {
	cfg     AttachDetachConfig
	log     *slog.Logger
	factory informers.SharedInformerFactory
	pods    cache.Indexer
	podList corelisters.PodLister
	vas     storagelisters.VolumeAttachmentLister
	synced  []cache.InformerSynced
	queue   *keyQueue
}

// NewAttachDetach builds the controller; Run starts it.
func NewAttachDetach(cfg AttachDetachConfig) (*AttachDetach, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	podInf, vaInf := f.Core().V1().Pods(), f.Storage().V1().VolumeAttachments()
	if err := podInf.Informer().AddIndexers(cache.Indexers{volumeIndex: podVolumeIndex}); err != nil {
		return nil, fmt.Errorf("attach/detach: indexing pods by volume: %w", err)
	}
	ad := &AttachDetach{
		cfg: cfg, log: cfg.Logger, factory: f,
		pods: podInf.Informer().GetIndexer(), podList: podInf.Lister(), vas: vaInf.Lister(),
		synced: []cache.InformerSynced{podInf.Informer().HasSynced, vaInf.Informer().HasSynced},
	}
	ad.queue = newKeyQueue("attachdetach", cfg.Clock, cfg.Logger, ad.sync)
	onPod := func(obj any) {
		if p := podFromObj(obj); p != nil {
			for _, v := range podVolumeIDs(p) {
				ad.queue.add(v)
			}
		}
	}
	if err := addHandler(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) }, DeleteFunc: onPod,
	}); err != nil {
		return nil, err
	}
	if err := addHandler(vaInf.Informer(), ad.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	return ad, nil
}

// Run reconciles volumes until ctx ends.
func (ad *AttachDetach) Run(ctx context.Context) error {
	ad.factory.Start(ctx.Done())
	defer ad.factory.Shutdown()
	if err := waitForSync(ctx, "attach/detach", ad.synced...); err != nil {
		return err
	}
	ad.log.Info("attach/detach controller started")
	ad.queue.run(ctx, ad.cfg.Workers)
	return nil
}

// VolumeID names the RWO volume behind claim in namespace, and its
// VolumeAttachment: "<namespace>.<claim>" (the kubelet uses the same
// convention, kubelet.VolumeID).
func VolumeID(namespace, claim string) string { return namespace + "." + claim }

// podVolumeIDs lists the IDs of pod's RWO volumes.
func podVolumeIDs(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, VolumeID(p.Namespace, v.PersistentVolumeClaim.ClaimName))
		}
	}
	return out
}

func podVolumeIndex(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return podVolumeIDs(p), nil
}

// attachPlan is what to do for one volume.
type attachPlan struct {
	// attach, when set, is the node to attach the absent volume to.
	attach string
	// markAttached: the attachment exists but is not marked attached yet.
	markAttached bool
	// detachCandidate: no pod using the volume on the attachment's node is
	// in the cache; confirm with the API before detaching.
	detachCandidate bool
}

// planAttach decides for volume from the pods using it (from the cache) and
// its attachment, if any. It is pure.
func planAttach(pods []*corev1.Pod, va *storagev1.VolumeAttachment) attachPlan {
	if va != nil {
		if va.DeletionTimestamp != nil {
			return attachPlan{}
		}
		for _, p := range pods {
			if p.Spec.NodeName == va.Spec.NodeName {
				return attachPlan{markAttached: !va.Status.Attached}
			}
		}
		return attachPlan{detachCandidate: true}
	}
	// The oldest bound pod that still wants to run gets the volume; the
	// others wait for it to be gone.
	var want []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" && podActive(p) {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return attachPlan{}
	}
	sort.Slice(want, func(i, j int) bool {
		a, b := want[i], want[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return attachPlan{attach: want[0].Spec.NodeName}
}

// sync reconciles one volume.
func (ad *AttachDetach) sync(ctx context.Context, volume string) error {
	objs, err := ad.pods.ByIndex(volumeIndex, volume)
	if err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	va, err := ad.vas.Get(volume)
	if apierrors.IsNotFound(err) {
		va, err = nil, nil
	}
	if err != nil {
		return err
	}
	plan := planAttach(pods, va)
	switch {
	case plan.attach != "":
		return ad.attach(ctx, volume, plan.attach)
	case plan.markAttached:
		return ad.markAttached(ctx, va)
	case plan.detachCandidate:
		return ad.detach(ctx, volume, va)
	}
	return nil
}

// attach creates the volume's attachment to node: the compare-and-swap of
// PS-15 (an AlreadyExists means someone attached it first; the informer
// brings that attachment and the volume is looked at again).
func (ad *AttachDetach) attach(ctx context.Context, volume, node string) error {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: volume},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: Attacher, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &volume},
		},
	}
	created, err := ad.cfg.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("attaching volume %s to node %s: %w", volume, node, err)
	}
	ad.log.Info("volume attached", "volume", volume, "node", node, "token", created.ResourceVersion)
	return ad.markAttached(ctx, created)
}

// markAttached reports the attachment done: the simulated storage needs no
// work to attach, so the controller is its own attacher.
func (ad *AttachDetach) markAttached(ctx context.Context, va *storagev1.VolumeAttachment) error {
	if va.Status.Attached {
		return nil
	}
	upd := va.DeepCopy()
	upd.Status.Attached = true
	_, err := ad.cfg.Client.StorageV1().VolumeAttachments().UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // changed meanwhile; the informer brings it back
	}
	if err != nil {
		return fmt.Errorf("marking volume %s attached to %s: %w", va.Name, va.Spec.NodeName, err)
	}
	return nil
}

// detach deletes the volume's attachment once the API confirms that no pod
// object using the volume on the attachment's node exists. The delete is
// conditional on the attachment the decision was about.
func (ad *AttachDetach) detach(ctx context.Context, volume string, va *storagev1.VolumeAttachment) error {
	ns, _, ok := strings.Cut(volume, ".")
	if !ok {
		return nil // not one of ours
	}
	list, err := ad.cfg.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("confirming volume %s unused on %s: %w", volume, va.Spec.NodeName, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != va.Spec.NodeName {
			continue
		}
		for _, v := range podVolumeIDs(p) {
			if v == volume {
				return nil // still there: its pod event brings the volume back
			}
		}
	}
	uid, rv := va.UID, va.ResourceVersion
	err = ad.cfg.Client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("detaching volume %s from %s: %w", volume, va.Spec.NodeName, err)
	}
	ad.log.Info("volume detached", "volume", volume, "node", va.Spec.NodeName)
	return nil
}
