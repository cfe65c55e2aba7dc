package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

// cvWorld builds the objects of a small cluster for the convergence rules.
type cvWorld struct {
	pods        []*corev1.Pod
	nodes       []*corev1.Node
	sets        []*appsv1.StatefulSet
	rss         []*appsv1.ReplicaSet
	deployments []*appsv1.Deployment
	attachments []*storagev1.VolumeAttachment
	gone        map[string]bool // FinalState.Gone
}

func cvAttach(name, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: storagev1.VolumeAttachmentSpec{NodeName: node, Attacher: "podsafe"}}
}

func cvNodeObj(name string, ready bool, fenced bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
	if fenced {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: fencedConditionType, Status: corev1.ConditionTrue})
	}
	return n
}

// cvRunning is a pod Running and Ready on node, controlled by owner.
func cvRunning(name, node string, owner metav1.Object, kind string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node, SchedulerName: defaultSchedulerName, Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	}
	return p
}

func cvSetObj(name string, replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), PodManagementPolicy: policy}}
}

func cvRSObj(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
}

// cvDeploymentObj is Deployment "app" with replicas, rolled out from
// revision 1 to 2: its set app-2 (of its template) holds the replicas, each
// a Running and Ready pod on n2, and app-1 (of the older template) none.
// It adds the sets and pods to w.
func cvDeploymentObj(w *cvWorld, replicas int32) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", UID: "uid-app", Generation: 4},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}, Annotations: map[string]string{"rev": "2"}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas}}
	for rev, n := range map[string]int32{"1": 0, "2": replicas} {
		rs := cvRSObj("app-"+rev, n)
		rs.OwnerReferences = []metav1.OwnerReference{{Kind: "Deployment", Name: "app", UID: d.UID, Controller: ptr.To(true)}}
		rs.Spec.Template.Labels = map[string]string{"app": "app", podTemplateHashLabel: "h" + rev}
		rs.Spec.Template.Annotations = map[string]string{"rev": rev}
		rs.Generation, rs.Status = 1, appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: n, ReadyReplicas: n}
		w.rss = append(w.rss, rs)
		for i := range n {
			w.pods = append(w.pods, cvRunning(fmt.Sprintf("app-%s-%d", rev, i), "n2", rs, "ReplicaSet"))
		}
	}
	slices.SortFunc(w.rss, func(a, b *appsv1.ReplicaSet) int { return strings.Compare(b.Name, a.Name) }) // web first
	return d
}

// converged is a cluster where every object is where it should be: two
// Ready nodes, one cut off (not Ready) and an empty fenced one, a
// ReplicaSet of 2, an OrderedReady set of 2 and a Parallel set of 1, a pod
// judged unschedulable, a terminating pet of a third set on the node cut
// off, a Failed pod of the ReplicaSet, and a volume attached to n1.
func converged() *cvWorld {
	w := &cvWorld{nodes: []*corev1.Node{cvNodeObj("n1", true, false), cvNodeObj("n2", true, false), cvNodeObj("n3", false, false), cvNodeObj("n4", true, true)}}
	w.attachments = append(w.attachments, cvAttach("va-1", "n1"))
	rs := cvRSObj("web", 2)
	rs.Generation, rs.Status = 3, appsv1.ReplicaSetStatus{ObservedGeneration: 3, Replicas: 2, ReadyReplicas: 2}
	db := cvSetObj("db", 2, "")
	db.Status = appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 2}
	par := cvSetObj("par", 1, appsv1.ParallelPodManagement)
	par.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1}
	cut := cvSetObj("cut", 1, "")
	w.rss = append(w.rss, rs)
	w.sets = append(w.sets, db, par, cut)
	failed := cvRunning("web-old", "n1", rs, "ReplicaSet")
	failed.Status.Phase = corev1.PodFailed
	pending := cvRunning("lonely", "", nil, "")
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}
	stuck := cvRunning("cut-0", "n3", cut, "StatefulSet")
	stuck.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
	stuck.DeletionGracePeriodSeconds = ptr.To[int64](30)
	w.deployments = append(w.deployments, cvDeploymentObj(w, 1))
	w.pods = append(w.pods,
		cvRunning("web-a", "n1", rs, "ReplicaSet"), cvRunning("web-b", "n2", rs, "ReplicaSet"), failed,
		cvRunning("db-0", "n1", db, "StatefulSet"), cvRunning("db-1", "n2", db, "StatefulSet"),
		cvRunning("par-0", "n2", par, "StatefulSet"), pending, stuck)
	return w
}

func (w *cvWorld) state(t *testing.T) FinalState {
	t.Helper()
	var st FinalState
	enc := func(dst *[]json.RawMessage, o any) {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		*dst = append(*dst, b)
	}
	for _, p := range w.pods {
		enc(&st.Pods, p)
	}
	for _, n := range w.nodes {
		enc(&st.Nodes, n)
	}
	for _, s := range w.sets {
		enc(&st.StatefulSets, s)
	}
	for _, r := range w.rss {
		enc(&st.ReplicaSets, r)
	}
	for _, d := range w.deployments {
		enc(&st.Deployments, d)
	}
	for _, a := range w.attachments {
		enc(&st.VolumeAttachments, a)
	}
	st.Gone = w.gone
	return st
}

// deleteWeb removes ReplicaSet web, its removal recorded, as a deletion
// with the given policy leaves it once its collector did nothing: gone
// (Background, Orphan) or held by its finalizer (Foreground).
func deleteWeb(w *cvWorld, policy string) {
	switch policy {
	case "Foreground":
		w.rss[0].DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
		w.rss[0].Finalizers = []string{finalizerForeground}
	default:
		w.gone = map[string]bool{string(w.rss[0].UID): true}
		w.rss = w.rss[1:]
	}
}

func (w *cvWorld) pod(name string) *corev1.Pod {
	for _, p := range w.pods {
		if p.Name == name {
			return p
		}
	}
	panic("no pod " + name)
}

func (w *cvWorld) drop(name string) {
	for i, p := range w.pods {
		if p.Name == name {
			w.pods = append(w.pods[:i], w.pods[i+1:]...)
			return
		}
	}
	panic("no pod " + name)
}

func TestDivergences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(w *cvWorld)
		want   []string // each a key and a fragment of its description
	}{
		{"converged", func(*cvWorld) {}, nil},
		{"terminating on a Ready node", func(w *cvWorld) {
			p := w.pod("web-a")
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
			p.DeletionGracePeriodSeconds = ptr.To[int64](5)
		}, []string{"pod/ns/web-a: PS-4 marked for deletion (grace 5 s) on node n1", "replicaset/ns/web: PS-7 wants 2 replicas and has 1"}},
		{"terminating and never bound", func(w *cvWorld) {
			p := w.pod("lonely")
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
		}, []string{"pod/ns/lonely: LC-11 marked for deletion and never bound"}},
		{"terminating on a node not Ready", func(w *cvWorld) {
			w.nodes[0] = cvNodeObj("n1", false, false)
			p := w.pod("web-old")
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
		}, nil},
		{"bound and never started", func(w *cvWorld) {
			w.pod("web-b").Status.Phase = corev1.PodPending
		}, []string{"pod/ns/web-b: PS-12 bound to node n2, which is Ready, yet still Pending"}},
		{"bound, waiting for its claim", func(w *cvWorld) {
			p := w.pod("web-b")
			p.Status.Phase = corev1.PodPending
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
		}, nil},
		{"never judged by the scheduler", func(w *cvWorld) {
			w.pod("lonely").Status.Conditions = nil
		}, []string{"pod/ns/lonely: PR-3 not bound and not judged unschedulable"}},
		{"unschedulable, and still too big", func(w *cvWorld) {
			room(w, "2", "10")
			w.pod("lonely").Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		}, nil},
		{"unschedulable, yet it fits now", func(w *cvWorld) {
			room(w, "2", "10")
			w.pod("lonely").Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, []string{"pod/ns/lonely: PR-3 not bound, though node n1, which is Ready, has room for it (it requests cpu 1000m, memory 0, pods 1; the pods there take cpu 0m, memory 0, pods 2 of cpu 2000m"}},
		{"its room is reserved for a nominated pod of higher priority", func(w *cvWorld) { reserved(w, 0) }, nil},
		{"a nominated pod of lower priority reserves nothing", func(w *cvWorld) { reserved(w, 200) },
			[]string{"pod/ns/lonely: PR-3 not bound, though node n1"}},
		{"unschedulable, fits, but tainted away", func(w *cvWorld) {
			room(w, "2", "10")
			for _, n := range w.nodes {
				n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
			}
		}, nil},
		{"unschedulable, fits, but spread constraints are not followed", func(w *cvWorld) {
			room(w, "2", "10")
			w.pod("lonely").Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, nil},
		{"another scheduler's pod", func(w *cvWorld) {
			p := w.pod("lonely")
			p.Status.Conditions = nil
			p.Spec.SchedulerName = "elsewhere"
		}, nil},
		{"a gated pod", func(w *cvWorld) {
			p := w.pod("lonely")
			p.Status.Conditions = nil
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "wait"}}
		}, nil},
		{"a pod left on a fenced node", func(w *cvWorld) { w.pod("web-b").Spec.NodeName = "n4" },
			[]string{"pod/ns/web-b: PS-14 bound to node n4, which is fenced, yet not force deleted"}},
		{"a terminating pod left on a fenced node", func(w *cvWorld) { w.pod("cut-0").Spec.NodeName = "n4" },
			[]string{"pod/ns/cut-0: PS-14 bound to node n4, which is fenced, yet not force deleted"}},
		{"an attachment left to a fenced node", func(w *cvWorld) { w.attachments = append(w.attachments, cvAttach("va-2", "n4")) },
			[]string{"volumeattachment//va-2: PS-15 attaches a volume to node n4, which is fenced, yet is not broken"}},
		{"ReplicaSet short", func(w *cvWorld) { w.drop("web-b") }, []string{"replicaset/ns/web: PS-7 wants 2 replicas and has 1"}},
		{"ReplicaSet over", func(w *cvWorld) { w.rss[0].Spec.Replicas = ptr.To[int32](1) }, []string{"replicaset/ns/web: PS-7 wants 1 replicas and has 2"}},
		{"ReplicaSet being deleted", func(w *cvWorld) {
			w.rss[0].DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
			w.drop("web-b")
		}, nil},
		{"pet not created", func(w *cvWorld) { w.drop("db-0") }, []string{"statefulset/ns/db: PS-12 wants 2 replicas and pet db-0 does not exist"}},
		{"OrderedReady waits for a lower ordinal", func(w *cvWorld) {
			w.drop("db-1")
			w.pod("db-0").Status.Conditions[1].Status = corev1.ConditionFalse
		}, nil},
		{"Parallel does not wait", func(w *cvWorld) {
			w.sets[1].Spec.Replicas = ptr.To[int32](2)
			w.pod("par-0").Status.Conditions[1].Status = corev1.ConditionFalse
		}, []string{"statefulset/ns/par: PS-12 wants 2 replicas and pet par-1 does not exist"}},
		{"failed pet not replaced", func(w *cvWorld) { w.pod("db-1").Status.Phase = corev1.PodFailed },
			[]string{"statefulset/ns/db: PS-11 pet db-1 is Failed and not marked for deletion, on node n2"}},
		{"failed pet on a node not Ready waits", func(w *cvWorld) {
			w.nodes[1] = cvNodeObj("n2", false, false)
			w.pod("db-1").Status.Phase = corev1.PodFailed
			w.pod("par-0").Spec.NodeName = "n1"
			w.pod("web-b").Spec.NodeName = "n1"
		}, nil},
		{"not scaled down", func(w *cvWorld) { w.sets[0].Spec.Replicas = ptr.To[int32](1) },
			[]string{"statefulset/ns/db: PS-12 wants 1 replicas and still has db-1"}},
		{"OrderedReady scale-down waits for a healthy set", func(w *cvWorld) {
			w.sets[0].Spec.Replicas = ptr.To[int32](1)
			w.pod("db-0").Status.Conditions[1].Status = corev1.ConditionFalse
		}, nil},
		{"ReplicaSet status behind", func(w *cvWorld) { w.rss[0].Status.ReadyReplicas = 1 },
			[]string{"replicaset/ns/web: PS-7 has its 2 replicas, but its status says readyReplicas 1 (counted 2)"}},
		{"ReplicaSet generation not observed", func(w *cvWorld) { w.rss[0].Generation = 4 },
			[]string{"replicaset/ns/web: PS-7 has its 2 replicas, but its status says observedGeneration 3 (generation 4)"}},
		{"StatefulSet status behind", func(w *cvWorld) { w.sets[0].Status.Replicas = 3 },
			[]string{"statefulset/ns/db: PS-12 has its pets where they should be, but its status says replicas 3 (counted 2)"}},
		{"a set with a terminating pet is not held to its status", func(w *cvWorld) {
			w.sets[2].Status.Replicas = 5
		}, nil},
		{"Deployment of a template no set has", func(w *cvWorld) { w.deployments[0].Spec.Template.Annotations["rev"] = "3" },
			[]string{"deployment/ns/app: PS-7 has no ReplicaSet of its current template (annotations rev=3): its rollout has not begun"}},
		{"Deployment's old set not scaled down", func(w *cvWorld) { oldAppSet(w, true) },
			[]string{"deployment/ns/app: PS-7 rollout not complete: its old ReplicaSet app-1 still has 1"}},
		{"Deployment's current set short", func(w *cvWorld) {
			w.deployments[0].Spec.Replicas = ptr.To[int32](2)
			w.deployments[0].Status.Replicas, w.deployments[0].Status.UpdatedReplicas, w.deployments[0].Status.ReadyReplicas = 2, 2, 2
		}, []string{"deployment/ns/app: PS-7 rollout not complete: its current ReplicaSet app-2 has 1 of its 2 replicas"}},
		{"Deployment status behind", func(w *cvWorld) { w.deployments[0].Status.UpdatedReplicas = 0 },
			[]string{"deployment/ns/app: PS-7 its rollout is complete (1 replicas), but its status says updatedReplicas 0"}},
		{"Deployment generation not observed", func(w *cvWorld) { w.deployments[0].Generation = 5 },
			[]string{"deployment/ns/app: PS-7 its rollout is complete (1 replicas), but its status says observedGeneration 4 (generation 5)"}},
		{"a rollout waits for its new pods to be Ready", func(w *cvWorld) {
			oldAppSet(w, true)
			w.pod("app-2-0").Status.Conditions[1].Status = corev1.ConditionFalse
			w.rss[1].Status.ReadyReplicas = 0
		}, nil},
		{"a paused Deployment is not rolled out", func(w *cvWorld) {
			w.deployments[0].Spec.Paused = true
			w.deployments[0].Spec.Template.Annotations["rev"] = "3"
		}, nil},
		{"two sets of the current template: neither judged", func(w *cvWorld) {
			oldAppSet(w, false)
			w.rss[2].Spec.Template.Annotations["rev"] = "2"
		}, nil},
		{"a set of a Deployment being deleted", func(w *cvWorld) {
			w.deployments[0].DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
			oldAppSet(w, true)
		}, nil},
		{"pods of a ReplicaSet deleted in the background, not collected", func(w *cvWorld) { deleteWeb(w, "Background") },
			[]string{"pod/ns/web-a: PS-9 refers to ReplicaSet web (uid uid-web), which is gone, yet is not marked for deletion",
				"pod/ns/web-b: PS-9 refers to ReplicaSet web", "pod/ns/web-old: PS-9 refers to ReplicaSet web"}},
		{"pods of a deleted ReplicaSet, collected", func(w *cvWorld) {
			deleteWeb(w, "Background")
			w.drop("web-a")
			w.drop("web-old")
			w.pod("web-b").DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)}
			w.nodes[1] = cvNodeObj("n2", false, false) // its kubelet is away: not judged here
			w.pod("db-1").Spec.NodeName, w.pod("par-0").Spec.NodeName = "n1", "n1"
			for _, p := range w.pods {
				if strings.HasPrefix(p.Name, "app-") {
					p.Spec.NodeName = "n1"
				}
			}
		}, nil},
		{"pods of a ReplicaSet deleted with Orphan, orphaned", func(w *cvWorld) {
			deleteWeb(w, "Orphan")
			for _, name := range []string{"web-a", "web-b", "web-old"} {
				w.pod(name).OwnerReferences = nil
			}
		}, nil},
		{"an owner gone without a record of its removal is not judged", func(w *cvWorld) {
			deleteWeb(w, "Background")
			w.gone = nil
		}, nil},
		{"a ReplicaSet deleted in the foreground waits for its pods", func(w *cvWorld) { deleteWeb(w, "Foreground") }, nil},
		{"a ReplicaSet deleted in the foreground, left once its pods are gone", func(w *cvWorld) {
			deleteWeb(w, "Foreground")
			w.drop("web-a")
			w.drop("web-b")
			w.drop("web-old")
		}, []string{"replicaset/ns/web: PS-9 marked for deletion and held by the garbage collector's finalizers (foregroundDeletion), yet still there"}},
		{"another finalizer holds a deleted ReplicaSet", func(w *cvWorld) {
			deleteWeb(w, "Foreground")
			w.rss[0].Finalizers = []string{"example.com/hold"}
			w.drop("web-a")
			w.drop("web-b")
			w.drop("web-old")
		}, nil},
		{"the ReplicaSets of a deleted Deployment, not collected", func(w *cvWorld) {
			w.gone = map[string]bool{"uid-app": true}
			w.deployments = nil
		}, []string{"replicaset/ns/app-1: PS-9 refers to Deployment app (uid uid-app), which is gone", "replicaset/ns/app-2: PS-9 refers to Deployment app"}},
		{"a same-named pod of another owner is no pet", func(w *cvWorld) {
			w.pod("db-1").OwnerReferences = nil
		}, []string{"statefulset/ns/db: PS-12 wants 2 replicas and pet db-1 does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := converged()
			tc.break_(w)
			conv, err := Converge(w.state(t))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range conv.Divergences {
				got = append(got, d.Key+": "+d.Guarantee+" "+d.Description)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("divergences:\n%s\nwant %d:\n%s", strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("divergence %d is %q, want it to begin %q", i, got[i], w)
				}
			}
		})
	}
}

// oldAppSet gives the Deployment's old set app-1 a replica, Running and
// Ready, its status saying so; with alsoCurrent, the Deployment's status
// counts it too, as it does while a rollout is under way.
func oldAppSet(w *cvWorld, alsoCurrent bool) {
	old := w.rss[2]
	old.Spec.Replicas, old.Status.Replicas, old.Status.ReadyReplicas = ptr.To[int32](1), 1, 1
	w.pods = append(w.pods, cvRunning("app-1-0", "n2", old, "ReplicaSet"))
	if alsoCurrent {
		w.deployments[0].Status.Replicas = 2
	}
}

// reserved makes lonely (of priority prio) want the 1 cpu each node has,
// which a pending pod of priority 100 nominated there reserves.
func reserved(w *cvWorld, prio int32) {
	room(w, "1", "10")
	lonely := w.pod("lonely")
	lonely.Spec.Priority = ptr.To(prio)
	lonely.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	for _, n := range []string{"n1", "n2"} {
		big := cvRunning("big-"+n, "", nil, "")
		big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		big.Spec.Priority = ptr.To[int32](100)
		// Its own placement is not judged (spread), its reservation is.
		big.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}}
		big.Status = corev1.PodStatus{Phase: corev1.PodPending, NominatedNodeName: n,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}
		w.pods = append(w.pods, big)
	}
}

// room gives every node cpu and pod slots.
func room(w *cvWorld, cpu, pods string) {
	for _, n := range w.nodes {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourcePods: resource.MustParse(pods)}
	}
}

func TestDivergencesBadObject(t *testing.T) {
	_, err := Converge(FinalState{Pods: []json.RawMessage{json.RawMessage(`{"metadata":[]}`)}})
	if err == nil || !strings.Contains(err.Error(), "pod 1 of 1 does not decode") {
		t.Fatalf("err = %v, want one naming the pod", err)
	}
}

// cvHistory records w's objects as store lines (with a deleted pod and a
// superseded version before them), the heal at healed and the end of the
// history tail later (recorder time), at time scale 10.
func cvHistory(t *testing.T, w *cvWorld, tail time.Duration) *history.History {
	t.Helper()
	h := &history.History{Complete: true, Meta: history.Meta{Extra: map[string]string{history.ExtraTimeScale: "10"}}}
	const healed = int64(time.Second)
	st := w.state(t)
	at := int64(0)
	add := func(res string, typ history.StoreEventType, obj json.RawMessage) {
		var m struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		}
		if err := json.Unmarshal(obj, &m); err != nil {
			t.Fatal(err)
		}
		at += int64(time.Millisecond)
		h.Store = append(h.Store, history.StoreEvent{Type: typ, Resource: res, Namespace: m.Metadata.Namespace, Name: m.Metadata.Name, Object: obj, T: at})
	}
	gone, _ := json.Marshal(cvRunning("gone", "n1", nil, ""))
	add("pods", history.StoreAdded, gone)
	add("pods", history.StoreDeleted, gone)
	for _, p := range st.Pods {
		add("pods", history.StoreAdded, json.RawMessage(`{"metadata":{"namespace":"ns","name":"`+podName(t, p)+`"},"status":{"phase":"Pending"}}`))
		add("pods", history.StoreModified, p)
	}
	for _, n := range st.Nodes {
		add("nodes", history.StoreModified, n)
	}
	for _, s := range st.StatefulSets {
		add("statefulsets.apps", history.StoreAdded, s)
	}
	for _, r := range st.ReplicaSets {
		add("replicasets.apps", history.StoreAdded, r)
	}
	for _, d := range st.Deployments {
		add("deployments.apps", history.StoreAdded, d)
	}
	h.Logs = []history.LogEntry{{Msg: LogWorkloadHealed, T: healed}}
	h.End = healed + int64(tail)
	return h
}

func podName(t *testing.T, raw json.RawMessage) string {
	var p corev1.Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	return p.Name
}

func TestCheckConvergence(t *testing.T) {
	ctx := context.Background()
	// At time scale 10 the bound (5 min + the longest grace, 30 s) is 33 s
	// of recorder time.
	enough, short := 34*time.Second, 30*time.Second

	res := CheckConvergence(ctx, cvHistory(t, converged(), short), Options{})
	if res.Verdict != Ok || !strings.Contains(res.Summary, "9 pods, 3 StatefulSets, 3 ReplicaSets and 1 Deployment") {
		t.Errorf("converged: %s: %s", res.Verdict, res.Summary)
	}

	broken := converged()
	broken.drop("web-b")
	broken.pod("db-1").Status.Phase = corev1.PodFailed
	res = CheckConvergence(ctx, cvHistory(t, broken, enough), Options{})
	if res.Verdict != Illegal || len(res.Evidence) != 2 || !strings.Contains(res.Summary, "2 divergences") {
		t.Fatalf("broken, long tail: %s (%d evidence): %s", res.Verdict, len(res.Evidence), res.Summary)
	}
	if e := res.Evidence[0]; e.Key != "replicaset/ns/web" || !strings.HasPrefix(e.Description, "PS-7: wants 2 replicas and has 1") {
		t.Errorf("evidence %+v", e)
	}
	if e := res.Evidence[1]; e.Key != "statefulset/ns/db" || !strings.HasPrefix(e.Description, "PS-11: pet db-1 is Failed") {
		t.Errorf("evidence %+v", e)
	}

	res = CheckConvergence(ctx, cvHistory(t, broken, short), Options{})
	if res.Verdict != Unknown || !strings.Contains(res.Summary, "stood still, healed, for only 5m0s (scaled) of the 5m30s") {
		t.Errorf("broken, short tail: %s: %s", res.Verdict, res.Summary)
	}

	h := cvHistory(t, broken, enough)
	h.Complete = false
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "no closing record") {
		t.Errorf("torn history: %s: %s", res.Verdict, res.Summary)
	}

	h = cvHistory(t, broken, enough)
	h.Logs = append(h.Logs, history.LogEntry{Msg: history.LogStoreEventsLost, Attrs: map[string]string{"resource": "replicasets.apps"}})
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "lost store events") {
		t.Errorf("lost events: %s: %s", res.Verdict, res.Summary)
	}
	// Lost events of every resource count; of a resource not read, not.
	for res, want := range map[string]Verdict{"": Unknown, "leases.coordination.k8s.io": Illegal} {
		h.Logs[len(h.Logs)-1].Attrs["resource"] = res
		if got := CheckConvergence(ctx, h, Options{}); got.Verdict != want {
			t.Errorf("lost events of %q: %s, want %s: %s", res, got.Verdict, want, got.Summary)
		}
	}

	// A change 5 s (recorder time) after the heal: the cluster stood still
	// for 29 s of the 34, 4m50s scaled, short of the bound.
	h = cvHistory(t, broken, enough)
	late := h.Store[len(h.Store)-1]
	late.T = int64(6 * time.Second)
	h.Store = append(h.Store, late)
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "stood still, healed, for only 4m50s (scaled)") {
		t.Errorf("a late change: %s: %s", res.Verdict, res.Summary)
	}

	// The run looked 2 s after the heal and found the cluster converged;
	// a pet failed after that: Ok, the cluster is settling again.
	h = cvHistory(t, converged(), short)
	failed := converged()
	failed.pod("db-1").Status.Phase = corev1.PodFailed
	raw, err := json.Marshal(failed.pod("db-1"))
	if err != nil {
		t.Fatal(err)
	}
	h.Store = append(h.Store, history.StoreEvent{Type: history.StoreModified, Resource: "pods", Namespace: "ns", Name: "db-1", Object: raw, T: int64(4 * time.Second)})
	h.Logs = append(h.Logs, history.LogEntry{Msg: LogConvergence, T: int64(3 * time.Second), Attrs: map[string]string{"converged": "true", "at": strconv.FormatInt(int64(2*time.Second), 10)}})
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Ok || !strings.Contains(res.Summary, "10s after the final heal (scaled) every object was where it should be") ||
		!strings.Contains(res.Summary, "pet db-1 is Failed") {
		t.Errorf("converged when the run looked: %s: %s", res.Verdict, res.Summary)
	}
	// A look that saw divergences proves nothing.
	h.Logs[len(h.Logs)-1].Attrs["converged"] = "false"
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown {
		t.Errorf("a look that did not converge: %s: %s", res.Verdict, res.Summary)
	}

	// ReplicaSet web removed (recorded) before the heal, its pods left
	// referring to it: the garbage collector did nothing. Orphaned, they
	// converge.
	gcWorld := converged()
	h = cvHistory(t, gcWorld, enough)
	rsRaw, err := json.Marshal(gcWorld.rss[0])
	if err != nil {
		t.Fatal(err)
	}
	h.Store = append(h.Store, history.StoreEvent{Type: history.StoreDeleted, Resource: "replicasets.apps", Namespace: "ns", Name: "web", Object: rsRaw, T: h.Store[len(h.Store)-1].T + 1})
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Illegal || len(res.Evidence) != 3 ||
		res.Evidence[0].Key != "pod/ns/web-a" || !strings.HasPrefix(res.Evidence[0].Description, "PS-9: refers to ReplicaSet web (uid uid-web), which is gone") {
		t.Errorf("pods of a removed ReplicaSet left: %s (%+v): %s", res.Verdict, res.Evidence, res.Summary)
	}
	for _, name := range []string{"web-a", "web-b", "web-old"} {
		gcWorld.pod(name).OwnerReferences = nil
	}
	gcWorld.rss = gcWorld.rss[1:]
	h = cvHistory(t, gcWorld, enough)
	h.Store = append(h.Store, history.StoreEvent{Type: history.StoreDeleted, Resource: "replicasets.apps", Namespace: "ns", Name: "web", Object: rsRaw, T: h.Store[len(h.Store)-1].T + 1})
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Ok || !strings.Contains(res.Summary, "nothing refers to the 1 owner whose removal was recorded") {
		t.Errorf("pods of a removed ReplicaSet orphaned: %s: %s", res.Verdict, res.Summary)
	}

	// Faults of 20 s in all (two overlapping and one apart) give the
	// clients' back-off 50 s of wall time: a 34 s tail is too short.
	h = cvHistory(t, broken, enough)
	h.Nemesis = []history.Interval{{Start: 0, End: int64(10 * time.Second)}, {Start: int64(5 * time.Second), End: int64(15 * time.Second)},
		{Start: int64(16 * time.Second), End: int64(21 * time.Second)}}
	if got := faultTime(h); got != 20*time.Second {
		t.Errorf("fault time %s, want 20s", got)
	}
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "back-off after 20s of faults may take 50s") {
		t.Errorf("long faults: %s: %s", res.Verdict, res.Summary)
	}
	if f := ConvergenceWallFloor(time.Hour); f != ConvergenceWallCeiling {
		t.Errorf("floor after an hour of faults %s, want the ceiling", f)
	}

	h = cvHistory(t, broken, enough)
	h.Logs = nil
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "no final heal") {
		t.Errorf("no heal: %s: %s", res.Verdict, res.Summary)
	}

	h = cvHistory(t, &cvWorld{nodes: converged().nodes}, enough)
	if res = CheckConvergence(ctx, h, Options{}); res.Verdict != Unknown || !strings.Contains(res.Summary, "nothing to judge") {
		t.Errorf("nothing: %s: %s", res.Verdict, res.Summary)
	}
}

// The tracker keeps the last version of each object and forgets deleted
// ones, whatever goroutines feed it.
func TestFinalTrackerConcurrent(t *testing.T) {
	tr := NewFinalTracker()
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 100 {
				name := string(rune('a'+g)) + "-" + strings.Repeat("x", i%3)
				obj := json.RawMessage(`{"metadata":{"name":"` + name + `"}}`)
				tr.Observe(history.StoreEvent{Type: history.StoreModified, Resource: "pods", Name: name, Object: obj})
				if i%3 == 2 {
					tr.Observe(history.StoreEvent{Type: history.StoreDeleted, Resource: "pods", Name: name, Object: obj})
				}
				tr.Observe(history.StoreEvent{Type: history.StoreModified, Resource: "leases.coordination.k8s.io", Name: name, Object: obj})
			}
		}()
	}
	for range 4 {
		<-done
	}
	if st := tr.State(); len(st.Pods) != 8 || len(st.Nodes)+len(st.StatefulSets)+len(st.ReplicaSets) != 0 {
		t.Fatalf("state has %d pods (want 8: 2 live names of 4 goroutines) and %d others", len(st.Pods), len(st.Nodes)+len(st.StatefulSets)+len(st.ReplicaSets))
	}
}

// TestFinalTrackerGone: the removal of an owner is kept by its UID, taken
// from the deletion's object or, when the line has none, from the last
// version recorded; a removed pod is not an owner.
func TestFinalTrackerGone(t *testing.T) {
	tr := NewFinalTracker()
	obj := func(uid string) json.RawMessage {
		return json.RawMessage(`{"metadata":{"namespace":"ns","name":"x","uid":"` + uid + `"}}`)
	}
	tr.Observe(history.StoreEvent{Type: history.StoreAdded, Resource: "replicasets.apps", Namespace: "ns", Name: "a", Object: obj("uid-a"), T: 1})
	tr.Observe(history.StoreEvent{Type: history.StoreDeleted, Resource: "replicasets.apps", Namespace: "ns", Name: "a", T: 2})
	tr.Observe(history.StoreEvent{Type: history.StoreDeleted, Resource: "deployments.apps", Namespace: "ns", Name: "d", Object: obj("uid-d"), T: 3})
	tr.Observe(history.StoreEvent{Type: history.StoreAdded, Resource: "statefulsets.apps", Namespace: "ns", Name: "s", Object: obj("uid-s"), T: 4})
	tr.Observe(history.StoreEvent{Type: history.StoreDeleted, Resource: "pods", Namespace: "ns", Name: "p", Object: obj("uid-p"), T: 5})
	st := tr.State()
	if want := map[string]bool{"uid-a": true, "uid-d": true}; !maps.Equal(st.Gone, want) {
		t.Fatalf("Gone = %v, want %v", st.Gone, want)
	}
	if len(st.ReplicaSets) != 0 || len(st.StatefulSets) != 1 {
		t.Fatalf("state: %d ReplicaSets, %d StatefulSets; want 0, 1", len(st.ReplicaSets), len(st.StatefulSets))
	}
}
