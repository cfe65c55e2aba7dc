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

// EffectiveGracePeriod is GP-6: the grace period the API server gives a pod
// deletion. It is requested (DeleteOptions.gracePeriodSeconds) if given, else
// spec.terminationGracePeriodSeconds, else 30; a negative value becomes 1;
// and an unscheduled pod or one in phase Succeeded or Failed is deleted at
// once (0), since nothing of it can be running. 0 removes the object at
// once; anything else marks the pod terminating. It is pure.
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

// deleteOptions reads DeleteOptions from the query and the body (JSON or
// protobuf); fields set in the body win.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	if err := rejectDryRun(r); err != nil {
		return nil, err
	}
	opts := &metav1.DeleteOptions{}
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
		return nil, apierrors.NewBadRequest("dryRun is not supported by this server")
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
	if ri.res.gr == grPods {
		pod, err := s.deletePod(r.Context(), ri, opts, VerbDelete)
		if err != nil {
			writeError(w, err)
			return
		}
		writeObject(w, http.StatusOK, ri.res, pod)
		return
	}
	obj, err := s.deleteNow(r.Context(), ri, opts, VerbDelete)
	if err != nil {
		writeError(w, err)
		return
	}
	m, _ := metaOf(obj)
	st := success(http.StatusOK)
	st.Details = &metav1.StatusDetails{Name: ri.name, Group: ri.res.group, Kind: ri.res.resource, UID: m.GetUID()}
	writeJSON(w, http.StatusOK, st)
}

// deletePod deletes a pod by GP-6 and PS-3: at once when the effective grace
// is 0 (subject to the force-deletion authority), otherwise by marking it
// terminating with deletionTimestamp = now + grace; a second deletion may
// only bring that deadline forward. It is a compare-and-swap loop on the
// pod's resourceVersion, and returns the pod as deleted or as now stored.
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
		grace := EffectiveGracePeriod(pod, opts.GracePeriodSeconds)
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

		if grace == 0 {
			deleted, err := s.store.Delete(ctx, key, raftstore.Preconditions{ResourceVersion: stored.RV})
			if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
				continue
			}
			if err != nil {
				return nil, storeError(err, grPods, ri.name)
			}
			obj, err := ri.res.decodeStored(deleted.Data)
			if err != nil {
				return nil, err
			}
			// Report the deletion as kube-apiserver does: deletionTimestamp
			// now (or the earlier one) and deletionGracePeriodSeconds 0.
			out := obj.(*corev1.Pod)
			now := metav1.NewTime(s.clock.Now())
			if out.DeletionTimestamp == nil || out.DeletionTimestamp.After(now.Time) {
				out.DeletionTimestamp = &now
			}
			zero := int64(0)
			out.DeletionGracePeriodSeconds = &zero
			return out, nil
		}

		// Round the deadline up to the second, the resolution it is stored
		// at, so the grace is never shortened by the encoding (PS-3).
		deadline := metav1.NewTime(ceilSecond(s.clock.Now().Add(time.Duration(grace) * time.Second)))
		if pod.DeletionTimestamp != nil && !deadline.Before(pod.DeletionTimestamp) {
			lengthen := false
			// Planted bug "api-lengthens-grace" (bug zoo): a second deletion
			// asking for a longer grace than the pod's
			// deletionGracePeriodSeconds lengthens it (breaks PS-3).
			failpoint.Inject("lengthenGrace", func() {
				lengthen = pod.DeletionGracePeriodSeconds != nil && grace > *pod.DeletionGracePeriodSeconds
			})
			if !lengthen {
				// PS-3: a deletion may shorten the grace, never lengthen it.
				return pod, nil
			}
		}
		out := pod.DeepCopy()
		out.DeletionTimestamp = &deadline
		out.DeletionGracePeriodSeconds = &grace
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

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// deleteNow deletes a non-pod object at once, after its preconditions and
// the authority rules; a compare-and-swap on the resourceVersion it checked.
func (s *Server) deleteNow(ctx context.Context, ri *requestInfo, opts *metav1.DeleteOptions, verb string) (runtime.Object, error) {
	key := ri.key()
	for attempt := 0; ; attempt++ {
		stored, err := s.store.Get(ctx, key)
		if err != nil {
			return nil, storeError(err, ri.res.gr, ri.name)
		}
		cur, err := ri.res.decodeStored(stored.Data)
		if err != nil {
			return nil, err
		}
		m, _ := metaOf(cur)
		if err := checkDeletePreconditions(ri.res.gr, ri.name, m, opts); err != nil {
			return nil, err
		}
		req := Request{Identity: IdentityFrom(ctx), Verb: verb, Resource: ri.res.gr,
			Namespace: ri.namespace, Name: ri.name, Old: cur}
		if va, ok := cur.(*storagev1.VolumeAttachment); ok {
			if req.Node, err = s.nodeNamed(ctx, va.Spec.NodeName); err != nil {
				return nil, err
			}
		}
		if err := s.authorize(req); err != nil {
			return nil, err
		}
		deleted, err := s.store.Delete(ctx, key, raftstore.Preconditions{ResourceVersion: stored.RV})
		if errors.Is(err, raftstore.ErrConflict) && attempt < s.cfg.MaxConflictRetries {
			continue
		}
		if err != nil {
			return nil, storeError(err, ri.res.gr, ri.name)
		}
		return ri.res.decodeStored(deleted.Data)
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
			out, err = s.deleteNow(ctx, &one, opts, VerbDeleteCollection)
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
