package workload

// A family of StatefulSets or ReplicaSets the set workloads drive, and the
// pod calls every pod workload makes (list, get, create, delete, re-delete
// with a shorter grace).

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

// setFamily is a workload's fixed family of sets: StatefulSets (pets) or
// ReplicaSets named prefix0, prefix1, … in one namespace, built by template.
type setFamily struct {
	ns     string
	prefix string
	// pets: StatefulSets, whose pods are named <set>-<ordinal>; otherwise
	// ReplicaSets, whose pods have generated names.
	pets bool
	// statefulSet / replicaSet / deployment build set i with the given
	// replicas; a family with deployment is of Deployments, whose pods
	// have generated names too.
	statefulSet func(i int, replicas int32) *appsv1.StatefulSet
	replicaSet  func(i int, replicas int32) *appsv1.ReplicaSet
	deployment  func(i int, replicas int32) *appsv1.Deployment
	// rollouts is the percentage of a Deployment family's scale operations
	// that are rollouts instead.
	rollouts int
}

func (f *setFamily) name(i int) string { return f.prefix + strconv.Itoa(i) }

func (f *setFamily) key(name string) string { return f.ns + "/" + name }

// run performs a and teaches the planner its outcome.
func (f *setFamily) run(ctx context.Context, p *proc, pl *setPlanner, a setAction) {
	replicas := -1
	err := f.do(ctx, p, a, &replicas)
	pl.observe(a, replicas, err)
}

// do performs a on the family as process p, recording every call, and
// returns the error the planner learns from (a get that found nothing
// returns NotFound although it is recorded as a successful read); a get
// stores the spec.replicas it read in replicas.
func (f *setFamily) do(ctx context.Context, p *proc, a setAction, replicas *int) error {
	name := f.name(a.set)
	switch a.verb {
	case setCreate:
		return p.call(ctx, "create", f.key(name), fmt.Sprintf("replicas=%d", a.replicas), func(ctx context.Context, _ *history.Op) error {
			var err error
			switch {
			case f.pets:
				_, err = p.cs.AppsV1().StatefulSets(f.ns).Create(ctx, f.statefulSet(a.set, a.replicas), metav1.CreateOptions{})
			case f.deployment != nil:
				_, err = p.cs.AppsV1().Deployments(f.ns).Create(ctx, f.deployment(a.set, a.replicas), metav1.CreateOptions{})
			default:
				_, err = p.cs.AppsV1().ReplicaSets(f.ns).Create(ctx, f.replicaSet(a.set, a.replicas), metav1.CreateOptions{})
			}
			return err
		})
	case setScale:
		if a.rollout {
			return f.rollout(ctx, p, name, a.revision)
		}
		return p.call(ctx, "scale", f.key(name), fmt.Sprintf("replicas=%d", a.replicas), func(ctx context.Context, op *history.Op) error {
			sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
				Spec: autoscalingv1.ScaleSpec{Replicas: a.replicas}}
			var err error
			switch {
			case f.pets:
				sc, err = p.cs.AppsV1().StatefulSets(f.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			case f.deployment != nil:
				sc, err = p.cs.AppsV1().Deployments(f.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			default:
				sc, err = p.cs.AppsV1().ReplicaSets(f.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			}
			if err == nil {
				op.Output = fmt.Sprintf("replicas=%d current=%d", sc.Spec.Replicas, sc.Status.Replicas)
			}
			return err
		})
	case setDeletePod:
		pod, err := name+"-"+strconv.Itoa(a.ord), error(nil)
		if f.pets {
			err = deletePod(ctx, p, f.ns, pod, a.grace)
		} else {
			pod, err = f.deleteReplica(ctx, p, name, a)
		}
		if err == nil && pod != "" && a.regrace {
			regracePod(ctx, p, f.ns, pod, a.regraceAfter, a.regraceGrace)
		}
		return err
	case setGet:
		var found error
		err := p.call(ctx, "get", f.key(name), "", func(ctx context.Context, op *history.Op) error {
			var spec *int32
			var st string
			var err error
			switch {
			case f.pets:
				var s *appsv1.StatefulSet
				if s, err = p.cs.AppsV1().StatefulSets(f.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					spec, st = s.Spec.Replicas, fmt.Sprintf("current=%d ready=%d", s.Status.Replicas, s.Status.ReadyReplicas)
				}
			case f.deployment != nil:
				var d *appsv1.Deployment
				if d, err = p.cs.AppsV1().Deployments(f.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					spec, st = d.Spec.Replicas, fmt.Sprintf("current=%d updated=%d ready=%d revision=%s", d.Status.Replicas, d.Status.UpdatedReplicas,
						d.Status.ReadyReplicas, d.Spec.Template.Annotations[RevisionAnnotation])
				}
			default:
				var s *appsv1.ReplicaSet
				if s, err = p.cs.AppsV1().ReplicaSets(f.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					spec, st = s.Spec.Replicas, fmt.Sprintf("current=%d ready=%d", s.Status.Replicas, s.Status.ReadyReplicas)
				}
			}
			found = err
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				op.Found = true
				*replicas = int(ptr.Deref(spec, 1))
				op.Output = fmt.Sprintf("replicas=%d %s", *replicas, st)
			}
			return err
		})
		if err == nil {
			return found
		}
		return err
	case setList:
		_, err := listPods(ctx, p, f.ns, "")
		return err
	}
	return nil
}

// RevisionAnnotation is the pod template annotation a Deployment's rollout
// changes (operation "rollout", Value revision=N): each value is a new
// template, so a new ReplicaSet.
const RevisionAnnotation = "podsafe.io/revision"

// rollout changes Deployment name's pod template, its RevisionAnnotation
// set to revision, with one merge patch: the recorded operation "rollout".
func (f *setFamily) rollout(ctx context.Context, p *proc, name string, revision uint32) error {
	value := fmt.Sprintf("revision=%d", revision)
	return p.call(ctx, "rollout", f.key(name), value, func(ctx context.Context, op *history.Op) error {
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"%d"}}}}}`, RevisionAnnotation, revision)
		d, err := p.cs.AppsV1().Deployments(f.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err == nil {
			op.Output = fmt.Sprintf("generation=%d replicas=%d", d.Generation, ptr.Deref(d.Spec.Replicas, 1))
		}
		return err
	})
}

// deleteSet deletes set name with the propagation policy: the recorded
// operation "delete" (Value propagation=<policy>).
func (f *setFamily) deleteSet(ctx context.Context, p *proc, name string, policy metav1.DeletionPropagation) error {
	return p.call(ctx, "delete", f.key(name), "propagation="+string(policy), func(ctx context.Context, _ *history.Op) error {
		opts := metav1.DeleteOptions{PropagationPolicy: &policy}
		switch {
		case f.pets:
			return p.cs.AppsV1().StatefulSets(f.ns).Delete(ctx, name, opts)
		case f.deployment != nil:
			return p.cs.AppsV1().Deployments(f.ns).Delete(ctx, name, opts)
		default:
			return p.cs.AppsV1().ReplicaSets(f.ns).Delete(ctx, name, opts)
		}
	})
}

// deleteReplica lists the pods of a set and deletes the one a.pick
// names among those not yet terminating, sorted by name; it returns that
// pod's name ("" when there was none).
func (f *setFamily) deleteReplica(ctx context.Context, p *proc, set string, a setAction) (string, error) {
	pods, err := listPods(ctx, p, f.ns, set)
	if err != nil {
		return "", err
	}
	var names []string
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			names = append(names, pods[i].Name)
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	name := names[a.pick%uint64(len(names))]
	return name, deletePod(ctx, p, f.ns, name, a.grace)
}

// listPods lists the pods of namespace ns, all of them (app "") or those
// labelled app=<app>, as a recorded operation "list" (key ns) or
// "list-pods" (key ns/app).
func listPods(ctx context.Context, p *proc, ns, app string) ([]corev1.Pod, error) {
	verb, key, opts := "list", ns, metav1.ListOptions{}
	if app != "" {
		verb, key, opts.LabelSelector = "list-pods", ns+"/"+app, labelApp+"="+app
	}
	var pods []corev1.Pod
	err := p.call(ctx, verb, key, "", func(ctx context.Context, op *history.Op) error {
		l, err := p.cs.CoreV1().Pods(ns).List(ctx, opts)
		if err == nil {
			pods = l.Items
			op.Found = len(pods) > 0
			op.Output = podSummary(pods)
		}
		return err
	})
	return pods, err
}

// deletePod deletes pod ns/name with grace (nil: the pod's own) as a
// recorded operation "delete-pod".
func deletePod(ctx context.Context, p *proc, ns, name string, grace *int64) error {
	return p.call(ctx, "delete-pod", ns+"/"+name, graceValue(grace), func(ctx context.Context, _ *history.Op) error {
		return p.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})
	})
}

// regracePod waits after of scaled time, reads pod ns/name and, if it is
// still terminating, deletes it again with grace seconds, preconditioned on
// its UID so that a replacement of the same name is never hit: the
// recorded operation "regrace" (Value grace=N uid=U). A shorter grace must
// shorten the termination under way, a longer one must change nothing
// (PS-3, GP-5). Its outcome teaches the planner nothing.
func regracePod(ctx context.Context, p *proc, ns, name string, after time.Duration, grace int64) {
	if after > 0 {
		t := p.clock.NewTimer(after)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
	}
	pod, err := getPod(ctx, p, ns, name)
	if err != nil || pod == nil || pod.DeletionTimestamp == nil {
		return
	}
	uid := pod.UID
	_ = p.call(ctx, "regrace", ns+"/"+name, fmt.Sprintf("grace=%d uid=%s", grace, uid), func(ctx context.Context, _ *history.Op) error {
		return p.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace),
			Preconditions: &metav1.Preconditions{UID: &uid}})
	})
}

// getPod reads pod ns/name as a recorded operation "get-pod". A pod that is
// not there is a successful read (Found false) and returns nil, nil.
func getPod(ctx context.Context, p *proc, ns, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := p.call(ctx, "get-pod", ns+"/"+name, "", func(ctx context.Context, op *history.Op) error {
		got, err := p.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			pod, op.Found, op.Output = got, true, podState(got)
		}
		return err
	})
	return pod, err
}

// createPod creates pod as a recorded operation "create-pod"; value says
// what kind of pod it is.
func createPod(ctx context.Context, p *proc, pod *corev1.Pod, value string) error {
	return p.call(ctx, "create-pod", pod.Namespace+"/"+pod.Name, value, func(ctx context.Context, _ *history.Op) error {
		_, err := p.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// labelApp is the label that ties a workload's pods to their set (or group).
const labelApp = "app"

// setTemplate is the pod template of set i, called name, of a set
// workload: labelled app=<name>, annotated with ann, one simulated
// container, the grace given (0: setGrace(i)), adjusted by placement.
func setTemplate(i int, name string, grace int64, ann map[string]string, placement func(*corev1.PodSpec)) corev1.PodTemplateSpec {
	if grace == 0 {
		grace = setGrace(i)
	}
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelApp: name}, Annotations: ann},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers:                    []corev1.Container{simContainer("app")},
		},
	}
	place(placement, &t.Spec)
	return t
}

// setGrace is the default terminationGracePeriodSeconds of set i's pods:
// 5 s for the first, 2 s more for each next, at most 10.
func setGrace(i int) int64 { return min(5+2*int64(i), 10) }
