package apiserver

// Priority admission (PR-1, PR-2): a pod's priority resolved from its
// PriorityClass, and the limits on the classes themselves. Defaulting is in
// defaults.go, validation in validation.go, generation in generation.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// Priority limits (PR-1): user classes may not exceed HighestUserPriority;
// names starting with "system-" are reserved for system classes.
const (
	HighestUserPriority   = int32(1_000_000_000)
	highestSystemPriority = int32(2_000_001_000)
	systemPriorityPrefix  = "system-"
)

// admitPodPriority resolves a new pod's priority from its PriorityClass
// (PR-2): an unknown class is refused, no class means the global default
// class or 0, and a client-chosen integer must agree with the class.
func (s *Server) admitPodPriority(ctx context.Context, pod *corev1.Pod) error {
	class, err := s.podPriorityClass(ctx, pod)
	if err != nil {
		return err
	}
	var priority int32
	policy := corev1.PreemptLowerPriority
	if class != nil {
		priority = class.Value
		pod.Spec.PriorityClassName = class.Name
		if class.PreemptionPolicy != nil {
			policy = *class.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return apierrors.NewForbidden(grPods, pod.Name, fmt.Errorf(
			"the integer value of priority (%d) must not be provided in pod spec; the server computed %d from the PriorityClass name",
			*pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if class != nil && class.PreemptionPolicy != nil || pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = &policy
	}
	return nil
}

// podPriorityClass returns the class a new pod gets: the one it names, or
// the global default (nil when there is none). It reads the server's class
// cache (see priorityClassCache for what that guarantees) and the store when
// the cache cannot answer.
func (s *Server) podPriorityClass(ctx context.Context, pod *corev1.Pod) (*schedulingv1.PriorityClass, error) {
	s.classes.ensureStarted(s.ctx)
	name := pod.Spec.PriorityClassName
	if name == "" {
		if class, synced := s.classes.globalDefault(); synced {
			return class, nil
		}
		objs, _, err := s.store.List(ctx, pcResource, "")
		if err != nil {
			return nil, storeError(err, grPriorityClasses, "")
		}
		var class *schedulingv1.PriorityClass
		for _, o := range objs {
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(o.Data, pc); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			if pc.GlobalDefault && (class == nil || pc.Value < class.Value) {
				class = pc
			}
		}
		return class, nil
	}
	if class, _ := s.classes.get(name); class != nil {
		return class, nil
	}
	stored, err := s.store.Get(ctx, raftstore.Key{Resource: pcResource, Name: name})
	if errors.Is(err, raftstore.ErrNotFound) {
		return nil, apierrors.NewForbidden(grPods, pod.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
	}
	if err != nil {
		return nil, storeError(err, grPriorityClasses, name)
	}
	class := &schedulingv1.PriorityClass{}
	if err := json.Unmarshal(stored.Data, class); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return class, nil
}

// admitPriorityClass refuses a second global default class (PR-1).
func (s *Server) admitPriorityClass(ctx context.Context, pc *schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault {
		return nil
	}
	objs, _, err := s.store.List(ctx, pcResource, "")
	if err != nil {
		return storeError(err, grPriorityClasses, "")
	}
	for _, o := range objs {
		other := &schedulingv1.PriorityClass{}
		if err := json.Unmarshal(o.Data, other); err != nil {
			return apierrors.NewInternalError(err)
		}
		if other.GlobalDefault && other.Name != pc.Name {
			return apierrors.NewInvalid(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass").GroupKind(), pc.Name,
				field.ErrorList{field.Forbidden(field.NewPath("globalDefault"),
					fmt.Sprintf("PriorityClass %s is already the global default; at most one can be", other.Name))})
		}
	}
	return nil
}

var grPriorityClasses = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses").GroupResource()
