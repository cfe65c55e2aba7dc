package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsafe/podsafe/raftstore"
)

var gvkDeleteOptions = metav1.SchemeGroupVersion.WithKind("DeleteOptions")

// EffectiveGracePeriod is GP-6: the grace period the API server gives the
// first deletion of a pod. It is requested (DeleteOptions.gracePeriodSeconds)
// if given, else spec.terminationGracePeriodSeconds, else 30; a negative
// value becomes 1; and an unscheduled pod or one in phase Succeeded or
// Failed is deleted at once (0), since nothing of it can be running. 0
// removes the object at once; anything else marks the pod terminating. It is
// pure. It is kube-apiserver's pod strategy CheckGracefulDelete; a pod
// already terminating is GracefulDelete's to decide.
func EffectiveGracePeriod(pod *corev1.Pod, requested *int64) int64 {
	if pod.Spec.NodeName == "" || podTerminal(pod) {
		return 0
	}
	g := defaultGracePeriodSeconds
	switch {
	case requested != nil:
		g = *requested
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	if g < 0 {
		g = 1
	}
	return g
}

// DeleteOutcome is what a DELETE does to a pod (GracefulDelete).
type DeleteOutcome int

// The outcomes of a pod DELETE.
const (
	// DeleteNow removes the object at once.
	DeleteNow DeleteOutcome = iota + 1
	// DeleteGraceful stores the pod terminating, or terminating sooner,
	// with a new deletionTimestamp and deletionGracePeriodSeconds.
	DeleteGraceful
	// DeletePending leaves a graceful deletion already under way as it is:
	// nothing is written, and the answer is the pod (200).
	DeletePending
)

// String names the outcome as logs and the oracle print it.
func (o DeleteOutcome) String() string {
	switch o {
	case DeleteNow:
		return "delete-now"
	case DeleteGraceful:
		return "graceful"
	case DeletePending:
		return "pending"
	}
	return fmt.Sprintf("DeleteOutcome(%d)", int(o))
}

// GracefulDelete is GP-6 and PS-3: what a DELETE asking for the grace
// requested (DeleteOptions.gracePeriodSeconds, nil when not given) does to
// pod at now, by kube-apiserver v1.37.2's rules (rest.BeforeDelete, the pod
// strategy's CheckGracefulDelete and the generic registry's Delete, for a pod
// without finalizers). A negative request counts as 1.
//
// The first deletion (no deletionTimestamp yet) takes EffectiveGracePeriod:
// 0 deletes at once, anything else marks the pod terminating with
// deletionTimestamp now + grace and bumps a set metadata.generation.
//
// A pod already terminating is not judged again by its spec, node or phase:
// with deletionGracePeriodSeconds nil or 0 it is deleted at once (a deletion
// left half done); with no grace requested, or one no shorter than its
// deletionGracePeriodSeconds, the deletion is pending and nothing changes
// (PS-3: never lengthened); a shorter grace g moves the deadline to the
// deletion's start (deletionTimestamp - deletionGracePeriodSeconds) + g,
// and when that is already past, to now with grace 1 (g 0 deletes at once).
// So the grace values are compared, not the deadlines, and a deadline
// already overrun may move to now, later than before.
//
// updated is a copy of pod as the DELETE leaves it: as stored for
// DeleteGraceful, with every deadline rounded up to the whole second it is
// stored at (so the encoding never shortens a grace); as answered for
// DeletePending; as last seen before removal for DeleteNow
// (deletionGracePeriodSeconds 0 when this DELETE set it). It is pure: no
// store, no authority (Server.deletePod applies PS-8..PS-10, PS-14 to the
// outcome), and pod is not modified.
func GracefulDelete(pod *corev1.Pod, requested *int64, now time.Time) (updated *corev1.Pod, outcome DeleteOutcome) {
	out := pod.DeepCopy()
	var g *int64
	if requested != nil {
		v := *requested
		if v < 0 {
			v = 1
		}
		g = &v
	}
	if out.DeletionTimestamp == nil {
		period := EffectiveGracePeriod(out, g)
		deadline := metav1.NewTime(now.Add(time.Duration(period) * time.Second))
		if period > 0 {
			deadline = metav1.NewTime(ceilSecond(deadline.Time))
		}
		out.DeletionTimestamp, out.DeletionGracePeriodSeconds = &deadline, &period
		if out.Generation > 0 {
			out.Generation++
		}
		if period == 0 {
			return out, DeleteNow
		}
		return out, DeleteGraceful
	}
	if d := out.DeletionGracePeriodSeconds; d != nil && *d < 0 {
		one := int64(1)
		out.DeletionGracePeriodSeconds = &one
	}
	d := out.DeletionGracePeriodSeconds
	switch {
	case d == nil || *d == 0:
		return pod.DeepCopy(), DeleteNow
	case g == nil || *g >= *d:
		return out, DeletePending
	}
	// Shorten: the deletion keeps its start and ends g after it.
	period := *g
	deadline := out.DeletionTimestamp.Add(time.Duration(period-*d) * time.Second)
	if deadline.Before(now) {
		deadline = now
		if period != 0 {
			period = 1
		}
	}
	if period > 0 {
		deadline = ceilSecond(deadline)
	}
	ts := metav1.NewTime(deadline)
	out.DeletionTimestamp, out.DeletionGracePeriodSeconds = &ts, &period
	if period == 0 {
		return out, DeleteNow
	}
	return out, DeleteGraceful
}

// deleteOptions reads DeleteOptions from the query and the body (JSON or
// protobuf); fields set in the body win.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts, err := readDeleteOptions(r)
	if err != nil {
		return nil, err
	}
	if _, err := dryRunParam(opts.DryRun); err != nil {
		return nil, err
	}
	if err := validatePropagation(opts); err != nil {
		return nil, err
	}
	return opts, nil
}

// readDeleteOptions reads DeleteOptions; see deleteOptions.
func readDeleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{DryRun: r.URL.Query()["dryRun"]}
	q := r.URL.Query()
	if g := q.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q: it is an integer", g))
		}
		opts.GracePeriodSeconds = &n
	}
	if p := q.Get("propagationPolicy"); p != "" {
		policy := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &policy
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return opts, nil
	}
	mt, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	fromBody := &metav1.DeleteOptions{}
	switch mt {
	case mediaJSON, mediaYAML:
		// Plain JSON decoding: clients send DeleteOptions under several
		// apiVersions (v1, meta.k8s.io/v1, the resource's group).
		if err := json.Unmarshal(body, fromBody); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding DeleteOptions: %v", err))
		}
	case mediaProtobuf:
		if _, _, err := bodyDecoder.Decode(body, &gvkDeleteOptions, fromBody); err != nil && !runtime.IsStrictDecodingError(err) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decoding DeleteOptions: %v", err))
		}
	default:
		return nil, unsupportedMediaType(mt)
	}
	if len(fromBody.DryRun) > 0 {
		opts.DryRun = fromBody.DryRun
	}
	if fromBody.GracePeriodSeconds != nil {
		opts.GracePeriodSeconds = fromBody.GracePeriodSeconds
	}
	if fromBody.PropagationPolicy != nil {
		opts.PropagationPolicy = fromBody.PropagationPolicy
	}
	opts.Preconditions = fromBody.Preconditions
	return opts, nil
}

// checkDeletePreconditions compares DeleteOptions.preconditions with the
// stored object (409 on a mismatch).
func checkDeletePreconditions(gr schema.GroupResource, name string, m metav1.Object, opts *metav1.DeleteOptions) error {
	p := opts.Preconditions
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return apierrors.NewConflict(gr, name, fmt.Errorf(
			"Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, fmt.Errorf(
			"Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// serveDelete answers DELETE of one object.
func (s *Server) serveDelete(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(opts.DryRun) > 0 {
		r = r.WithContext(withDryRun(r.Context()))
	}
	if ri.res.gr == grPods {
		pod, err := s.deletePod(r.Context(), ri, opts, VerbDelete)
		if err != nil {
			writeError(w, err)
			return
		}
		writeObject(w, http.StatusOK, ri.res, pod)
		return
	}
	obj, kept, err := s.deleteNow(r.Context(), ri, opts, VerbDelete)
	if err != nil {
		writeError(w, err)
		return
	}
	if kept {
		// Marked deleted and kept for its finalizers (a terminating
		// namespace, an owner the garbage collector finalizes): 200 with
		// the object, as kube-apiserver answers.
		writeObject(w, http.StatusOK, ri.res, obj)
		return
	}
	m, _ := metaOf(obj)
	st := success(http.StatusOK)
	st.Details = &metav1.StatusDetails{Name: ri.name, Group: ri.res.group, Kind: ri.res.resource, UID: m.GetUID()}
	writeJSON(w, http.StatusOK, st)
}

// deletePod deletes a pod by GP-6 and PS-3 as GracefulDelete decides: at
// once (subject to the force-deletion authority), by marking it terminating
// or terminating sooner, or not at all when a graceful deletion is pending.
// It is a compare-and-swap loop on the pod's resourceVersion, and returns the
// pod as deleted, as now stored, or (pending) as it stands.
func (s *Server) deletePod(ctx context.Context, ri *requestInfo, opts *metav1.DeleteOptions, verb string) (*corev1.Pod, error) {
	key := ri.key()
	sub := ""
	if verb == VerbCreate {
		sub = subEviction
	}
	for attempt := 0; ; attempt++ {
		stored, err := s.store.Get(ctx, key)
		if err != nil {
			return nil, storeError(err, grPods, ri.name)
		}
		obj, err := ri.res.decodeStored(stored.Data)
		if err != nil {
			return nil, err
		}
		pod := obj.(*corev1.Pod)
		if err := checkDeletePreconditions(grPods, ri.name, pod, opts); err != nil {
			return nil, err
		}
		now := s.clock.Now()
		out, outcome := GracefulDelete(pod, opts.GracePeriodSeconds, now)
		if outcome == DeletePending {
			out, outcome = s.lengthenGrace(pod, out, opts.GracePeriodSeconds, now)
		}
		// Finalizers, the propagation policy's included, keep a pod
		// deleted at once as an object marked deleted with grace 0
		// until they are removed (gc_finalizers.go).
		_, fins := deletionFinalizers(pod.Finalizers, opts)
		keep := outcome == DeleteNow && len(fins) > 0
		if outcome != DeletePending {
			out.Finalizers = fins
		}
		if keep {
			out.DeletionGracePeriodSeconds = new(int64)
		}
		grace := leftGrace(out, outcome)
		req := Request{Identity: IdentityFrom(ctx), Verb: verb, Resource: grPods, Subresource: sub,
			Namespace: ri.namespace, Name: ri.name, Old: pod, GracePeriodSeconds: &grace}
		if grace == 0 && pod.Spec.NodeName != "" && !podTerminal(pod) {
			if req.Node, err = s.podNode(ctx, pod); err != nil {
				return nil, err
			}
		}
		if err := s.authorize(req); err != nil {
			return nil, err
		}

		switch outcome {
		case DeletePending:
			// As kube-apiserver answers a pending graceful deletion: 200
			// with the pod, nothing written.
			return out, nil
		case DeleteNow:
			if keep && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0 && sameSet(pod.Finalizers, fins) {
				// Already marked deleted, waiting for its finalizers.
				return pod, nil
			}
			if keep {
				break
			}
			_, err := s.store.Delete(ctx, key, raftstore.Preconditions{ResourceVersion: stored.RV})
			if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
				continue
			}
			if err != nil {
				return nil, storeError(err, grPods, ri.name)
			}
			// The precondition made the removed object the one decided on.
			return out, nil
		}
		data, err := ri.res.encodeForStore(out)
		if err != nil {
			return nil, err
		}
		written, err := s.store.Update(ctx, key, data, raftstore.Preconditions{ResourceVersion: stored.RV})
		if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
			continue
		}
		if err != nil {
			return nil, storeError(err, grPods, ri.name)
		}
		obj, err = ri.res.decodeStored(written.Data)
		if err != nil {
			return nil, err
		}
		return obj.(*corev1.Pod), nil
	}
}

// leftGrace is the grace a deletion leaves, as the authority judges it
// (Request.GracePeriodSeconds): 0 when it removes the pod at once, whichever
// DELETE that is, else the deletionGracePeriodSeconds it leaves.
func leftGrace(updated *corev1.Pod, outcome DeleteOutcome) int64 {
	if outcome == DeleteNow || updated.DeletionGracePeriodSeconds == nil {
		return 0
	}
	return *updated.DeletionGracePeriodSeconds
}

// lengthenGrace is the planted bug "api-lengthens-grace" (bug zoo): a
// pending deletion asking for a longer grace than the pod's
// deletionGracePeriodSeconds (requested, or the spec's when none is)
// lengthens it, counted from now (breaks PS-3). Without the failpoint it
// returns pending unchanged.
func (s *Server) lengthenGrace(pod, pending *corev1.Pod, requested *int64, now time.Time) (*corev1.Pod, DeleteOutcome) {
	lengthen := false
	grace := EffectiveGracePeriod(pod, requested)
	failpoint.InjectContext(s.fp, "lengthenGrace", func() {
		lengthen = pod.DeletionGracePeriodSeconds != nil && grace > *pod.DeletionGracePeriodSeconds
	})
	if !lengthen {
		return pending, DeletePending
	}
	out := pod.DeepCopy()
	deadline := metav1.NewTime(ceilSecond(now.Add(time.Duration(grace) * time.Second)))
	out.DeletionTimestamp, out.DeletionGracePeriodSeconds = &deadline, &grace
	return out, DeleteGraceful
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// immortalNamespaces are the namespaces no one may delete, as in
// kube-apiserver.
var immortalNamespaces = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// deleteNow deletes a non-pod object, after its preconditions and the
// authority rules; a compare-and-swap on the resourceVersion it checked. An
// object that keeps finalizers (and a namespace until it is finalized) is
// only marked deleted: it is returned with kept true.
func (s *Server) deleteNow(ctx context.Context, ri *requestInfo, opts *metav1.DeleteOptions, verb string) (obj runtime.Object, kept bool, err error) {
	if ri.res.gr == grNamespaces && immortalNamespaces[ri.name] {
		// kube-apiserver's NamespaceLifecycle admission.
		return nil, false, apierrors.NewForbidden(ri.res.gr, ri.name, errors.New("this namespace may not be deleted"))
	}
	key := ri.key()
	for attempt := 0; ; attempt++ {
		stored, err := s.store.Get(ctx, key)
		if err != nil {
			return nil, false, storeError(err, ri.res.gr, ri.name)
		}
		cur, err := ri.res.decodeStored(stored.Data)
		if err != nil {
			return nil, false, err
		}
		m, _ := metaOf(cur)
		if err := checkDeletePreconditions(ri.res.gr, ri.name, m, opts); err != nil {
			return nil, false, err
		}
		req := Request{Identity: IdentityFrom(ctx), Verb: verb, Resource: ri.res.gr,
			Namespace: ri.namespace, Name: ri.name, Old: cur}
		if va, ok := cur.(*storagev1.VolumeAttachment); ok {
			if req.Node, err = s.nodeNamed(ctx, va.Spec.NodeName); err != nil {
				return nil, false, err
			}
		}
		if err := s.authorize(req); err != nil {
			return nil, false, err
		}
		// Each attempt decides afresh: a conflict of the last one left
		// kept set, which must not skip this one's decision.
		var out runtime.Object
		kept = false
		if ns, ok := cur.(*corev1.Namespace); ok {
			out, kept, err = s.deleteNamespace(ctx, ri, ns, stored.RV, opts)
		}
		if !kept && err == nil {
			out, kept, err = s.deleteWithFinalizers(ctx, ri, cur, stored.RV, opts)
		}
		if kept || err != nil {
			if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
				continue
			}
			return out, kept, storeError(err, ri.res.gr, ri.name)
		}
		deleted, err := s.store.Delete(ctx, key, raftstore.Preconditions{ResourceVersion: stored.RV})
		if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
			continue
		}
		if err != nil {
			return nil, false, storeError(err, ri.res.gr, ri.name)
		}
		out, err = ri.res.decodeStored(deleted.Data)
		if svc, ok := out.(*corev1.Service); ok && err == nil {
			// Its cluster IPs are free again (kube-apiserver's IPAddress
			// objects go with their Service).
			s.releaseServiceIPs(ctx, svc)
		}
		return out, false, err
	}
}

// serveDeleteCollection answers DELETE on a collection: every selected
// object is deleted as a single DELETE would delete it (pods gracefully),
// one after another; the first failure ends the request. The response lists
// what was deleted or marked terminating.
func (s *Server) serveDeleteCollection(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	ctx := r.Context()
	opts, err := deleteOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(opts.DryRun) > 0 {
		ctx = withDryRun(ctx)
	}
	sel, err := parseSelector(ri.res, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	objs, rev, err := s.store.List(ctx, ri.res.storeKey, ri.namespace)
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ""))
		return
	}
	items := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		obj, err := ri.res.decodeStored(o.Data)
		if err != nil {
			writeError(w, err)
			return
		}
		if !sel.matches(obj) {
			continue
		}
		one := *ri
		one.name = o.Key.Name
		var out runtime.Object
		if ri.res.gr == grPods {
			out, err = s.deletePod(ctx, &one, opts, VerbDeleteCollection)
		} else {
			out, _, err = s.deleteNow(ctx, &one, opts, VerbDeleteCollection)
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			writeError(w, err)
			return
		}
		out.GetObjectKind().SetGroupVersionKind(ri.res.gvk)
		data, err := json.Marshal(out)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		items = append(items, data)
	}
	writeJSON(w, http.StatusOK, listBody{
		Kind: ri.res.listGVK.Kind, APIVersion: ri.res.apiVersion(),
		Metadata: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rev, 10)}, Items: items,
	})
}
