package apiserver

import (
	"context"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

var (
	gvkBinding  = corev1.SchemeGroupVersion.WithKind("Binding")
	gvkEviction = policyv1.SchemeGroupVersion.WithKind("Eviction")
	gvkScale    = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	grPDBs      = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets").GroupResource()
)

// success is the Status body of a subresource POST that returns no object.
func success(code int) metav1.Status {
	return metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: int32(code)}
}

// serveBinding answers POST pods/NAME/binding: the scheduler places an
// unbound pod on a node, once (LC-3).
func (s *Server) serveBinding(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	if err := s.bind(r, ri); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, success(http.StatusCreated))
}

// bind binds the pod named by ri to the binding's target node.
func (s *Server) bind(r *http.Request, ri *requestInfo) error {
	ctx := r.Context()
	validation, err := fieldValidation(r)
	if err != nil {
		return err
	}
	obj, _, err := decodeBody(r, gvkBinding, validation)
	if err != nil {
		return err
	}
	b := obj.(*corev1.Binding)
	if b.Name != "" && b.Name != ri.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the binding names pod %s but was sent for pod %s", b.Name, ri.name))
	}
	if b.Namespace != "" && b.Namespace != ri.namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the binding (%s) does not match the namespace sent on the request (%s)", b.Namespace, ri.namespace))
	}
	var errs field.ErrorList
	if b.Target.Name == "" {
		errs = append(errs, field.Required(field.NewPath("target", "name"), "name of the node to bind to"))
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		errs = append(errs, field.NotSupported(field.NewPath("target", "kind"), b.Target.Kind, []string{"Node"}))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gvkBinding.GroupKind(), ri.name, errs)
	}
	req := Request{Identity: IdentityFrom(ctx), Verb: VerbCreate, Resource: grPods, Subresource: subBinding,
		Namespace: ri.namespace, Name: ri.name, Object: b}
	if err := s.authorize(req); err != nil {
		return err
	}
	grBinding := grPods
	grBinding.Resource = "pods/binding"
	_, err = s.guaranteedUpdate(ctx, ri.res, ri.key(), func(cur runtime.Object, _ uint64) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		req.Old = pod
		if err := s.authorize(req); err != nil {
			return nil, err
		}
		switch {
		case b.UID != "" && b.UID != pod.UID:
			return nil, apierrors.NewConflict(grBinding, ri.name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", b.UID, pod.UID))
		case pod.DeletionTimestamp != nil:
			return nil, apierrors.NewConflict(grBinding, ri.name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", ri.name))
		case pod.Spec.NodeName != "":
			return nil, apierrors.NewConflict(grBinding, ri.name, fmt.Errorf("pod %s is already assigned to node %q", ri.name, pod.Spec.NodeName))
		}
		out := pod.DeepCopy()
		out.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
		setPodCondition(&out.Status, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(s.clock.Now()),
		})
		return out, nil
	})
	return err
}

// setPodCondition replaces or appends a condition, keeping the transition
// time when the status did not change.
func setPodCondition(status *corev1.PodStatus, c corev1.PodCondition) {
	for i := range status.Conditions {
		if status.Conditions[i].Type == c.Type {
			if status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = status.Conditions[i].LastTransitionTime
			}
			status.Conditions[i] = c
			return
		}
	}
	status.Conditions = append(status.Conditions, c)
}

// serveEviction answers POST pods/NAME/eviction: a graceful deletion that
// first consumes one allowed disruption of the pod's PodDisruptionBudget, or
// is refused with 429 when the budget has none left.
func (s *Server) serveEviction(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	ctx := r.Context()
	validation, err := fieldValidation(r)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, _, err := decodeBody(r, gvkEviction, validation)
	if err != nil {
		writeError(w, err)
		return
	}
	ev := obj.(*policyv1.Eviction)
	if ev.Name != "" && ev.Name != ri.name {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("the eviction names pod %s but was sent for pod %s", ev.Name, ri.name)))
		return
	}
	opts := ev.DeleteOptions
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	stored, err := s.store.Get(ctx, ri.key())
	if err != nil {
		writeError(w, storeError(err, grPods, ri.name))
		return
	}
	cur, err := ri.res.decodeStored(stored.Data)
	if err != nil {
		writeError(w, err)
		return
	}
	pod := cur.(*corev1.Pod)
	// Refuse a forbidden eviction before it uses up a disruption. The
	// authority judges the grace the deletion would leave (GracefulDelete):
	// an eviction of a pod already terminating may be pending, not a force.
	grace := leftGrace(GracefulDelete(pod, opts.GracePeriodSeconds, s.clock.Now()))
	req := Request{Identity: IdentityFrom(ctx), Verb: VerbCreate, Resource: grPods, Subresource: subEviction,
		Namespace: ri.namespace, Name: ri.name, Old: pod, GracePeriodSeconds: &grace}
	if grace == 0 && pod.Spec.NodeName != "" && !podTerminal(pod) {
		if req.Node, err = s.podNode(ctx, pod); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := s.authorize(req); err != nil {
		writeError(w, err)
		return
	}
	if pod.Spec.NodeName != "" && !podTerminal(pod) && pod.DeletionTimestamp == nil {
		// As in kube-apiserver, the budget is spent before the delete: if the
		// delete then fails the disruption stays counted until the budget's
		// status is recomputed (no disruption controller runs yet), which errs
		// towards refusing evictions, never towards allowing too many.
		if err := s.consumeDisruption(ctx, pod); err != nil {
			writeError(w, err)
			return
		}
	}
	if _, err := s.deletePod(ctx, ri, opts, VerbCreate); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, success(http.StatusCreated))
}

// consumeDisruption takes one allowed disruption from the budget covering
// pod, recording the pod as disrupted.
func (s *Server) consumeDisruption(ctx context.Context, pod *corev1.Pod) error {
	pdbRes, _ := s.reg.lookup("policy", "v1", "poddisruptionbudgets")
	objs, _, err := s.store.List(ctx, pdbRes.storeKey, pod.Namespace)
	if err != nil {
		return storeError(err, grPDBs, "")
	}
	var match []*policyv1.PodDisruptionBudget
	for _, o := range objs {
		obj, err := pdbRes.decodeStored(o.Data)
		if err != nil {
			return err
		}
		pdb := obj.(*policyv1.PodDisruptionBudget)
		// In policy/v1 a nil selector selects nothing and an empty one
		// selects every pod of the namespace.
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil {
			continue
		}
		if sel.Matches(labelsOf(pod)) {
			match = append(match, pdb)
		}
	}
	switch len(match) {
	case 0:
		return nil
	case 1:
	default:
		return apierrors.NewInternalError(fmt.Errorf("pod %s/%s has more than one PodDisruptionBudget, which the eviction subresource does not support", pod.Namespace, pod.Name))
	}
	key := raftstore.Key{Resource: pdbRes.storeKey, Namespace: pod.Namespace, Name: match[0].Name}
	_, err = s.guaranteedUpdate(ctx, pdbRes, key, func(cur runtime.Object, _ uint64) (runtime.Object, error) {
		pdb := cur.(*policyv1.PodDisruptionBudget).DeepCopy()
		if pdb.Status.DisruptionsAllowed <= 0 {
			e := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{
				Type:    policyv1.DisruptionBudgetCause,
				Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
			})
			return nil, e
		}
		pdb.Status.DisruptionsAllowed--
		if pdb.Status.DisruptedPods == nil {
			pdb.Status.DisruptedPods = map[string]metav1.Time{}
		}
		pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(s.clock.Now())
		return pdb, nil
	})
	return err
}

// labelsOf returns an object's labels as a label set.
func labelsOf(obj metav1.Object) labels.Set { return labels.Set(obj.GetLabels()) }

// scaleOf builds the autoscaling/v1 Scale of a scalable object.
func scaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) {
	var replicas, current int32
	var selector *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		replicas, current, selector = derefReplicas(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *appsv1.ReplicaSet:
		replicas, current, selector = derefReplicas(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	case *appsv1.Deployment:
		replicas, current, selector = derefReplicas(o.Spec.Replicas), o.Status.Replicas, o.Spec.Selector
	default:
		return nil, apierrors.NewInternalError(fmt.Errorf("%T has no scale", obj))
	}
	m, _ := metaOf(obj)
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: gvkScale.Kind, APIVersion: gvkScale.GroupVersion().String()},
		ObjectMeta: metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), CreationTimestamp: m.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: current},
	}
	if selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil {
			sc.Status.Selector = sel.String()
		}
	}
	return sc, nil
}

// setReplicas sets spec.replicas of a scalable object.
func setReplicas(obj runtime.Object, n int32) {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		o.Spec.Replicas = &n
	case *appsv1.ReplicaSet:
		o.Spec.Replicas = &n
	case *appsv1.Deployment:
		o.Spec.Replicas = &n
	}
}

// derefReplicas reads spec.replicas, which defaults to 1.
func derefReplicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// serveGetScale answers GET .../scale.
func (s *Server) serveGetScale(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	stored, err := s.store.Get(r.Context(), ri.key())
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ri.name))
		return
	}
	obj, err := ri.res.decodeStored(stored.Data)
	if err != nil {
		writeError(w, err)
		return
	}
	sc, err := scaleOf(obj)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sc)
}

// serveUpdateScale answers PUT .../scale.
func (s *Server) serveUpdateScale(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	validation, err := fieldValidation(r)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, _, err := decodeBody(r, gvkScale, validation)
	if err != nil {
		writeError(w, err)
		return
	}
	sc := obj.(*autoscalingv1.Scale)
	out, err := s.updateScale(r.Context(), ri, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) { return sc, nil })
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// updateScale sets spec.replicas from the Scale that change derives from the
// current one, in a compare-and-swap loop.
func (s *Server) updateScale(ctx context.Context, ri *requestInfo, change func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error)) (*autoscalingv1.Scale, error) {
	out, err := s.guaranteedUpdate(ctx, ri.res, ri.key(), func(cur runtime.Object, curRV uint64) (runtime.Object, error) {
		curScale, err := scaleOf(cur)
		if err != nil {
			return nil, err
		}
		sc, err := change(curScale)
		if err != nil {
			return nil, err
		}
		if sc.Name != "" && sc.Name != ri.name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", sc.Name, ri.name))
		}
		if rv, err := parseRV(sc.ResourceVersion); err != nil {
			return nil, err
		} else if rv != 0 && rv != curRV {
			return nil, conflict(ri.res.gr, ri.name)
		}
		if sc.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(gvkScale.GroupKind(), ri.name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), sc.Spec.Replicas, "must be greater than or equal to 0")})
		}
		upd := cur.DeepCopyObject()
		setReplicas(upd, sc.Spec.Replicas)
		bumpGeneration(cur, upd)
		if err := s.authorize(Request{Identity: IdentityFrom(ctx), Verb: VerbUpdate, Resource: ri.res.gr, Subresource: subScale,
			Namespace: ri.namespace, Name: ri.name, Object: upd, Old: cur}); err != nil {
			return nil, err
		}
		return upd, nil
	})
	if err != nil {
		return nil, err
	}
	return scaleOf(out)
}
