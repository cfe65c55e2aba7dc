package cluster_test

import (
	"context"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// eventsOf lists "Reason from component[@host]" of the Events about object
// name in the default namespace.
func eventsOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) []string {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name}.AsSelector().String()
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		from := e.Source.Component
		if e.Source.Host != "" {
			from += "@" + e.Source.Host
		}
		out = append(out, e.Reason+" from "+from)
	}
	slices.Sort(out)
	return out
}

// waitEventsOf polls until name's Events include every one of want.
func waitEventsOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string, want ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = eventsOf(ctx, t, cs, name)
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(got, w) }) {
			return
		}
	}
	t.Fatalf("events of %s: %v, want %v among them", name, got, want)
}

// recorderGoroutines counts the goroutines running client-go's event
// recorders.
func recorderGoroutines() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "k8s.io/client-go/tools/record.")
}

// TestComponentEvents: on a cluster with every component, each one records
// its Events with its own identity, so kubectl describe explains a pod:
// the ReplicaSet controller's SuccessfulCreate, the scheduler's Scheduled
// or FailedScheduling, the pod's kubelet's Pulled, Created, Started and,
// on deletion, Killing. Their recorders stop with the cluster.
func TestComponentEvents(t *testing.T) {
	before := recorderGoroutines()
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 2, 1), TimeScale: kubeletScale,
		Kubelets: true, Scheduler: true, Controllers: true})
	cs := clientset(t, c, apiserver.IdentityWorkload, 0)
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}}}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEventsOf(ctx, t, cs, "web", "SuccessfulCreate from replicaset-controller")
	var pod corev1.Pod
	for deadline := time.Now().Add(30 * time.Second); pod.Spec.NodeName == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 1 {
			pod = pods.Items[0]
		}
	}
	if pod.Spec.NodeName == "" {
		t.Fatal("the replica was not scheduled")
	}
	kubelet := "kubelet@" + pod.Spec.NodeName
	waitEventsOf(ctx, t, cs, pod.Name, "Scheduled from default-scheduler",
		"Pulled from "+kubelet, "Created from "+kubelet, "Started from "+kubelet)

	huge := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "huge"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}}}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEventsOf(ctx, t, cs, "huge", "FailedScheduling from default-scheduler")
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=huge"})
	if err != nil {
		t.Fatal(err)
	}
	if msg := evs.Items[0].Message; !strings.HasPrefix(msg, "0/2 nodes are available: 2 Insufficient cpu.") {
		t.Errorf("FailedScheduling message %q, want kube-scheduler's per-node reasons", msg)
	}

	if err := cs.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEventsOf(ctx, t, cs, pod.Name, "Killing from "+kubelet)
	waitEventsOf(ctx, t, cs, "web", "SuccessfulCreate from replicaset-controller")

	if running := recorderGoroutines(); running <= before {
		t.Errorf("%d recorder goroutines while the cluster runs, want more than the %d before", running, before)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var left int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if left = recorderGoroutines(); left <= before {
			return
		}
	}
	t.Errorf("%d recorder goroutines left after the cluster closed, want at most the %d before", left, before)
}
