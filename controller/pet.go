package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pingcap/failpoint"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Labels the pet controller puts on every pet, as Kubernetes names them.
const (
	LabelPetName  = appsv1.StatefulSetPodNameLabel
	LabelPetIndex = appsv1.PodIndexLabel
)

// PetConfig configures a Pet controller. Zero values mean defaults.
type PetConfig struct {
	// Client talks to the API as the pet controller identity. Required.
	Client kubernetes.Interface
	// Clock paces retries (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Workers is the number of sets synced concurrently (default 2).
	Workers int

	_ struct{}
}

func (c *PetConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c PetConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: pet: Client is nil; pass a clientset for the pet controller identity", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: pet: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Pet serves apps/v1 StatefulSets with at-most-one semantics (PS-11): pet i
// of set NAME is the pod NAME-i, and a replacement is created only once the
// old pod object is gone from the store. A pod that merely began graceful
// deletion still counts as the pet, because its processes may still run; so
// a pet on a partitioned node stays unavailable rather than duplicated until
// its kubelet finishes the deletion or the node is deleted or fenced (PS-12).
// The stable name makes the store itself the arbiter: creating NAME-i fails
// while any NAME-i exists, however stale the controller's cache. Pods are
// created and deleted in parallel, deletions highest ordinal first.
type Pet struct {
	cfg     PetConfig
	log     *slog.Logger
	queue   *keyQueue
	factory informers.SharedInformerFactory
	sets    appslisters.StatefulSetLister
	pods    corelisters.PodLister
	nodes   corelisters.NodeLister
	synced  []cache.InformerSynced
	events  eventRecorder // events.go
}

// NewPet builds the controller; Run starts it.
func NewPet(cfg PetConfig) (*Pet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	setInf, podInf, nodeInf := f.Apps().V1().StatefulSets(), f.Core().V1().Pods(), f.Core().V1().Nodes()
	pc := &Pet{
		cfg: cfg, log: cfg.Logger, factory: f,
		sets: setInf.Lister(), pods: podInf.Lister(), nodes: nodeInf.Lister(),
		synced: []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
	}
	pc.queue = newKeyQueue("pet", cfg.Clock, cfg.Logger, pc.sync)
	if err := addHandler(setInf.Informer(), pc.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	podOwner := func(obj any) {
		if p := podFromObj(obj); p != nil {
			if key := controllerKey(p, "StatefulSet"); key != "" {
				pc.queue.add(key)
			}
		}
	}
	if err := addHandler(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: podOwner, UpdateFunc: func(_, obj any) { podOwner(obj) }, DeleteFunc: podOwner,
	}); err != nil {
		return nil, err
	}
	// A failed pet is replaced only once its node is Ready; requeue every set
	// when a node's readiness changes.
	if err := addHandler(nodeInf.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Node), obj.(*corev1.Node)
			if nodeReady(o) != nodeReady(n) {
				pc.requeueAll()
			}
		},
	}); err != nil {
		return nil, err
	}
	return pc, nil
}

// Run runs the controller until ctx ends.
func (pc *Pet) Run(ctx context.Context) error {
	pc.events.start(ctx, pc.cfg.Client, pc.cfg.Clock)
	pc.factory.Start(ctx.Done())
	defer pc.factory.Shutdown()
	if err := waitForSync(ctx, "pet", pc.synced...); err != nil {
		return err
	}
	pc.log.Info("pet controller started")
	pc.queue.run(ctx, pc.cfg.Workers)
	return nil
}

func (pc *Pet) requeueAll() {
	sets, err := pc.sets.List(everything)
	if err != nil {
		return
	}
	for _, s := range sets {
		pc.queue.add(s.Namespace + "/" + s.Name)
	}
}

// sync reconciles one set's pets and status.
func (pc *Pet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	set, err := pc.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading stateful set %s: %w", key, err)
	}
	pets, err := pc.ownedPets(set)
	if err != nil {
		return err
	}
	plan := planPets(set, pets, pc.nodeReady)
	if set.DeletionTimestamp != nil {
		// Being deleted (foreground or orphan): the garbage collector
		// decides about its pets, and none is made or replaced, as
		// upstream's StatefulSet controller stops at a deleted set.
		plan.create, plan.remove = nil, nil
	}
	// Failpoint petReplacesEarly is a PLANTED BUG for the bug zoo, inert
	// unless a scenario switches it on: a pet that began graceful deletion
	// is replaced at once, its object force deleted to free the name,
	// instead of once the object is gone; the old pet may still run when
	// its replacement starts (breaks PS-11).
	failpoint.InjectContext(pc.queue.fp, "petReplacesEarly", func() { plan.create = append(plan.create, pc.freeTerminating(ctx, set, pets)...) })
	var errs []error
	for _, ord := range plan.create {
		if err := pc.createPet(ctx, set, ord); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range plan.remove {
		err := pc.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, preconditionUID(p.UID))
		pc.petEvent(set, p.Name, "Delete", err)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("deleting pet %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		pc.log.Info("pet deleted", "pet", p.Namespace+"/"+p.Name)
	}
	if err := pc.updateStatus(ctx, set, pets); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// freeTerminating force deletes the set's terminating pets within its
// replicas and returns their ordinals. Only the petReplacesEarly planted
// bug calls it: the pet controller never force deletes.
func (pc *Pet) freeTerminating(ctx context.Context, set *appsv1.StatefulSet, pets map[int]*corev1.Pod) []int {
	var freed []int
	for ord, p := range pets {
		if ord >= int(ptr.Deref(set.Spec.Replicas, 1)) || !podTerminating(p) {
			continue
		}
		opts := preconditionUID(p.UID)
		opts.GracePeriodSeconds = ptr.To[int64](0)
		if err := pc.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); err == nil || apierrors.IsNotFound(err) {
			freed = append(freed, ord)
		}
	}
	sort.Ints(freed)
	return freed
}

// nodeReady reports whether the named node exists and is Ready.
func (pc *Pet) nodeReady(name string) bool {
	n, err := pc.nodes.Get(name)
	return err == nil && nodeReady(n)
}

// ownedPets returns the set's pods by ordinal; pods whose names carry no
// ordinal of the set are ignored.
func (pc *Pet) ownedPets(set *appsv1.StatefulSet) (map[int]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("stateful set %s/%s selector: %w", set.Namespace, set.Name, err)
	}
	pods, err := pc.pods.Pods(set.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("listing pods of stateful set %s/%s: %w", set.Namespace, set.Name, err)
	}
	pets := map[int]*corev1.Pod{}
	for _, p := range pods {
		if !ownedBy(p, set.UID) {
			continue
		}
		if ord, ok := petOrdinal(set.Name, p.Name); ok {
			pets[ord] = p
		}
	}
	return pets, nil
}

// petPlan is what one sync of a set does.
type petPlan struct {
	create []int         // ordinals with no pod object
	remove []*corev1.Pod // pods to delete gracefully, highest ordinal first
}

// planPets decides a sync; it is a pure function of the set, its pets and
// node readiness. An ordinal is recreated only when no pod object of it
// exists: terminating pods are waited for (PS-11). A pet in a terminal phase
// is deleted so it can be recreated, but only when it never reached a node
// or its node is Ready: a Failed phase set by the node controller on an
// unreachable node says nothing about its processes.
//
// A set whose template changed is rolled as the StatefulSet controller's
// RollingUpdate strategy rolls it: once every pet exists and is Running and
// Ready, the outdated pet of the highest ordinal at or above the partition
// is deleted gracefully, one at a time, and recreated from the new template
// once its object is gone. OnDelete leaves outdated pets until someone
// deletes them.
func planPets(set *appsv1.StatefulSet, pets map[int]*corev1.Pod, nodeReady func(string) bool) petPlan {
	replicas := int(ptr.Deref(set.Spec.Replicas, 1))
	var plan petPlan
	for ord := range replicas {
		p, ok := pets[ord]
		switch {
		case !ok:
			plan.create = append(plan.create, ord)
		case podTerminating(p):
		case podTerminal(p) && (p.Spec.NodeName == "" || nodeReady(p.Spec.NodeName)):
			plan.remove = append(plan.remove, p)
		}
	}
	var excess []int
	for ord, p := range pets {
		if ord >= replicas && !podTerminating(p) {
			excess = append(excess, ord)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(excess)))
	for _, ord := range excess {
		plan.remove = append(plan.remove, pets[ord])
	}
	if len(plan.create) == 0 && len(plan.remove) == 0 {
		if p := outdatedPet(set, pets, replicas); p != nil {
			plan.remove = append(plan.remove, p)
		}
	}
	return plan
}

// outdatedPet is the pet a rolling update replaces next, or nil: none while
// any pet of the set is missing, terminating or not Running and Ready.
func outdatedPet(set *appsv1.StatefulSet, pets map[int]*corev1.Pod, replicas int) *corev1.Pod {
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return nil
	}
	partition := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	for ord := range replicas {
		p := pets[ord]
		if p == nil || podTerminating(p) || p.Status.Phase != corev1.PodRunning || !podReady(p) {
			return nil
		}
	}
	rev := petRevision(set)
	for ord := replicas - 1; ord >= partition; ord-- {
		if p := pets[ord]; p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
			return p
		}
	}
	return nil
}

// petRevision names the set's template as the StatefulSet controller names
// its revisions: <set>-<hash of the template>. Every pet carries the
// revision it was made from (label controller-revision-hash).
func petRevision(set *appsv1.StatefulSet) string {
	b, _ := json.Marshal(set.Spec.Template) // a pod template always encodes
	h := fnv.New32a()
	_, _ = h.Write(b)
	return set.Name + "-" + rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// createPet creates pod NAME-ord from the set's template. AlreadyExists
// means the old pet object is still in the store: the cache was behind, and
// the next sync will see it.
func (pc *Pet) createPet(ctx context.Context, set *appsv1.StatefulSet, ord int) error {
	pod := newPet(set, ord)
	_, err := pc.cfg.Client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	pc.petEvent(set, pod.Name, "Create", err)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating pet %s/%s: %w", set.Namespace, pod.Name, err)
	}
	pc.log.Info("pet created", "pet", set.Namespace+"/"+pod.Name)
	return nil
}

// newPet builds pet ord of set from its template.
func newPet(set *appsv1.StatefulSet, ord int) *corev1.Pod {
	name := petName(set.Name, ord)
	lbls := maps.Clone(set.Spec.Template.Labels)
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[LabelPetName] = name
	lbls[LabelPetIndex] = strconv.Itoa(ord)
	lbls[appsv1.ControllerRevisionHashLabelKey] = petRevision(set)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: set.Namespace, Labels: lbls,
			Annotations:     maps.Clone(set.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		},
		Spec: *set.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = set.Spec.ServiceName
	// Each pet has its own RWO volume per claim template, named as
	// StatefulSets name them (<template>-<pet>), stable across
	// replacements: the replacement writes the same volume (PS-15).
	for _, t := range set.Spec.VolumeClaimTemplates {
		claim := t.Name + "-" + name
		vol := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
		replaced := false
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == t.Name {
				pod.Spec.Volumes[i], replaced = vol, true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	return pod
}

// updateStatus writes the set's status when it changed: its pets, the
// ready ones, and the revisions (updateRevision the template's, the pets
// made from it updated; currentRevision the one the pets had before the
// template changed, until every pet is updated), which kubectl rollout
// status reads.
func (pc *Pet) updateStatus(ctx context.Context, set *appsv1.StatefulSet, pets map[int]*corev1.Pod) error {
	st := petStatus(set, pets)
	if set.Status.ObservedGeneration == st.ObservedGeneration && set.Status.Replicas == st.Replicas &&
		set.Status.ReadyReplicas == st.ReadyReplicas && set.Status.AvailableReplicas == st.AvailableReplicas &&
		set.Status.CurrentReplicas == st.CurrentReplicas && set.Status.UpdatedReplicas == st.UpdatedReplicas &&
		set.Status.CurrentRevision == st.CurrentRevision && set.Status.UpdateRevision == st.UpdateRevision {
		return nil
	}
	s := set.DeepCopy()
	s.Status.ObservedGeneration, s.Status.Replicas = st.ObservedGeneration, st.Replicas
	s.Status.ReadyReplicas, s.Status.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
	s.Status.CurrentReplicas, s.Status.UpdatedReplicas = st.CurrentReplicas, st.UpdatedReplicas
	s.Status.CurrentRevision, s.Status.UpdateRevision = st.CurrentRevision, st.UpdateRevision
	if _, err := pc.cfg.Client.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of stateful set %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// petStatus is the status of set with pets; a pure function of them.
func petStatus(set *appsv1.StatefulSet, pets map[int]*corev1.Pod) appsv1.StatefulSetStatus {
	st := appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, Replicas: int32(len(pets)), UpdateRevision: petRevision(set)}
	revisions := map[string]int32{}
	for _, p := range pets {
		if podTerminating(p) {
			continue
		}
		if podReady(p) {
			st.ReadyReplicas++
		}
		revisions[p.Labels[appsv1.ControllerRevisionHashLabelKey]]++
	}
	st.AvailableReplicas = st.ReadyReplicas
	st.UpdatedReplicas = revisions[st.UpdateRevision]
	// The current revision stays what it was until every pet is updated;
	// a set that had none yet takes its pets' most common one.
	st.CurrentRevision = set.Status.CurrentRevision
	if st.UpdatedReplicas >= ptr.Deref(set.Spec.Replicas, 1) {
		st.CurrentRevision = st.UpdateRevision
	} else if st.CurrentRevision == "" || st.CurrentRevision == st.UpdateRevision {
		best := int32(-1)
		for _, rev := range slices.Sorted(maps.Keys(revisions)) {
			if n := revisions[rev]; rev != st.UpdateRevision && n > best {
				st.CurrentRevision, best = rev, n
			}
		}
	}
	st.CurrentReplicas = revisions[st.CurrentRevision]
	return st
}

// petName is the stable name of pet ord of set.
func petName(set string, ord int) string { return set + "-" + strconv.Itoa(ord) }

// petOrdinal parses the ordinal of pod name in set, if it has one.
func petOrdinal(set, pod string) (int, bool) {
	s, ok := strings.CutPrefix(pod, set+"-")
	if !ok || s == "" || s[0] < '0' || s[0] > '9' || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
