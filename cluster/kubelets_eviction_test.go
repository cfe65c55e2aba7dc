package cluster_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

const gi = 1 << 30

// startEvictionCluster starts one node whose kubelet evicts as opts says.
func startEvictionCluster(t *testing.T, opts cluster.KubeletOptions) (*cluster.Cluster, *kubelet.MemoryLedger, kubernetes.Interface) {
	t.Helper()
	ledger := &kubelet.MemoryLedger{}
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), TimeScale: kubeletScale,
		Kubelets: true, Ledger: ledger, Kubelet: opts})
	return c, ledger, clientset(t, c, apiserver.IdentityAdmin, 0)
}

// memPod runs one container that uses mem and ignores TERM, requesting
// request.
func memPod(name, mem, request string) *corev1.Pod {
	p := scriptedPod(name, "node-0", 30, map[string]string{"app": "ignore-term mem=" + mem}, "app")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)}
	p.Spec.Priority = ptr.To[int32](0)
	return p
}

// pressureLog records, in order, every MemoryPressure status node-0 reports,
// without repeats.
type pressureLog struct {
	mu   sync.Mutex
	seen []corev1.NodeCondition
}

func watchPressure(t *testing.T, cs kubernetes.Interface) *pressureLog {
	t.Helper()
	l := &pressureLog{}
	record := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != "node-0" {
			return
		}
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeMemoryPressure {
				continue
			}
			l.mu.Lock()
			if len(l.seen) == 0 || l.seen[len(l.seen)-1].Status != c.Status {
				l.seen = append(l.seen, c)
			}
			l.mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	return l
}

// statuses returns the statuses reported so far.
func (l *pressureLog) statuses() []corev1.ConditionStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []corev1.ConditionStatus
	for _, c := range l.seen {
		out = append(out, c.Status)
	}
	return out
}

// last returns the newest condition reported.
func (l *pressureLog) last() corev1.NodeCondition {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[len(l.seen)-1]
}

// endsWith reports whether the statuses reported end with want.
func (l *pressureLog) endsWith(want ...corev1.ConditionStatus) bool {
	got := l.statuses()
	return len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want)
}

func checkPressureCondition(t *testing.T, c corev1.NodeCondition, pressure bool) {
	t.Helper()
	status, reason := corev1.ConditionFalse, kubelet.ReasonSufficientMemory
	if pressure {
		status, reason = corev1.ConditionTrue, kubelet.ReasonInsufficientMemory
	}
	if c.Status != status || c.Reason != reason || c.Message == "" || c.LastTransitionTime.IsZero() || c.LastHeartbeatTime.IsZero() {
		t.Errorf("MemoryPressure condition %+v, want %s with reason %s and both times", c, status, reason)
	}
}

// TestKubeletHardEviction: configured through cluster.Config, the node's
// kubelet above EvictionHard reports MemoryPressure and evicts the pod most
// above its requests at once (GP-7: grace 0, the 1 s floor of GP-5 in the
// ledger), leaves it Failed with reason Evicted, and reports the pressure
// gone; the pod within its requests keeps running (PR-14).
func TestKubeletHardEviction(t *testing.T) {
	c, ledger, cs := startEvictionCluster(t, cluster.KubeletOptions{EvictionHard: gi, EvictionEvery: time.Second})
	pressure := watchPressure(t, cs)
	createPod(t, cs, memPod("within", "600Mi", "600Mi"))
	createPod(t, cs, memPod("greedy", "600Mi", "100Mi"))
	waitFor(t, "greedy evicted", 30*time.Second, func() bool {
		p := getPod(t, cs, "greedy")
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == kubelet.ReasonEvicted
	})
	terms, kills := entries(ledger, "greedy", kubelet.ActionTerm), entries(ledger, "greedy", kubelet.ActionKill)
	if len(terms) != 1 || terms[0].Grace != 1 || len(kills) != 1 || kills[0].Grace != 1 {
		t.Errorf("hard eviction: want one TERM and one KILL with the 1 s floor, ledger: %+v", entries(ledger, "greedy", ""))
	}
	waitFor(t, "MemoryPressure True, then False", 30*time.Second, func() bool {
		return pressure.endsWith(corev1.ConditionTrue, corev1.ConditionFalse)
	})
	gone := pressure.last()
	checkPressureCondition(t, gone, false)
	if exits := entries(ledger, "greedy", kubelet.ActionExit); len(exits) != 1 ||
		gone.LastTransitionTime.Time.Before(exits[0].Scaled.Truncate(time.Second)) {
		t.Errorf("pressure gone at %v, before greedy exited: %+v", gone.LastTransitionTime, exits)
	}
	time.Sleep(c.Clock().WallFor(5 * time.Second)) // five more looks at memory
	if ph, _ := podPhase(t, cs, "within"); ph != corev1.PodRunning || len(entries(ledger, "within", kubelet.ActionTerm)) != 0 {
		t.Errorf("the pod within its requests was touched: phase %s, ledger %+v", ph, entries(ledger, "within", ""))
	}
	// Deleting the evicted pod removes it (it is Failed: at once).
	deletePod(t, cs, "greedy", nil)
	waitFor(t, "greedy removed", 30*time.Second, func() bool { _, exists := podPhase(t, cs, "greedy"); return !exists })
}

// TestKubeletSoftEviction: above EvictionSoft the kubelet reports
// MemoryPressure at once but evicts only once usage stayed above it for
// EvictionSoftGracePeriod, and then with EvictionMaxPodGracePeriod (GP-7), as
// the ledger's Grace on TERM and KILL shows; KILL comes no earlier than that
// grace after TERM.
func TestKubeletSoftEviction(t *testing.T) {
	const maxGrace, softGrace = 4, 3 * time.Second
	_, ledger, cs := startEvictionCluster(t, cluster.KubeletOptions{EvictionSoft: gi, EvictionSoftGracePeriod: softGrace,
		EvictionMaxPodGracePeriod: maxGrace, EvictionEvery: time.Second})
	pressure := watchPressure(t, cs)
	createPod(t, cs, memPod("within", "600Mi", "600Mi"))
	createPod(t, cs, memPod("greedy", "600Mi", "100Mi"))
	waitFor(t, "greedy evicted", 30*time.Second, func() bool {
		p := getPod(t, cs, "greedy")
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == kubelet.ReasonEvicted
	})
	terms, kills := entries(ledger, "greedy", kubelet.ActionTerm), entries(ledger, "greedy", kubelet.ActionKill)
	if len(terms) != 1 || terms[0].Grace != maxGrace || len(kills) != 1 || kills[0].Grace != maxGrace {
		t.Fatalf("soft eviction: want one TERM and one KILL with grace %d, ledger: %+v", maxGrace, entries(ledger, "greedy", ""))
	}
	if d := kills[0].Scaled.Sub(terms[0].Scaled); d < maxGrace*time.Second {
		t.Errorf("KILL %v after TERM, want at least the %d s grace", d, maxGrace)
	}
	// Pressure began when the second container started.
	var began time.Time
	for _, e := range append(entries(ledger, "within", kubelet.ActionStart), entries(ledger, "greedy", kubelet.ActionStart)...) {
		if e.Scaled.After(began) {
			began = e.Scaled
		}
	}
	if d := terms[0].Scaled.Sub(began); d < softGrace {
		t.Errorf("evicted %v after usage went above the soft threshold, want at least %v", d, softGrace)
	}
	waitFor(t, "MemoryPressure True, then False", 30*time.Second, func() bool {
		return pressure.endsWith(corev1.ConditionTrue, corev1.ConditionFalse)
	})
	if ph, _ := podPhase(t, cs, "within"); ph != corev1.PodRunning || len(entries(ledger, "within", kubelet.ActionTerm)) != 0 {
		t.Errorf("the pod within its requests was touched: phase %s, ledger %+v", ph, entries(ledger, "within", ""))
	}
}

// TestKubeletNeverEvictsPodsWithinRequests: under hard pressure with every
// pod within its requests, the node reports MemoryPressure but evicts
// nothing (PR-14).
func TestKubeletNeverEvictsPodsWithinRequests(t *testing.T) {
	c, ledger, cs := startEvictionCluster(t, cluster.KubeletOptions{EvictionHard: gi, EvictionEvery: time.Second})
	pressure := watchPressure(t, cs)
	createPod(t, cs, memPod("a", "700Mi", "700Mi"))
	createPod(t, cs, memPod("b", "700Mi", "700Mi"))
	waitFor(t, "MemoryPressure True", 30*time.Second, func() bool { return pressure.endsWith(corev1.ConditionTrue) })
	checkPressureCondition(t, pressure.last(), true)
	time.Sleep(c.Clock().WallFor(5 * time.Second)) // five more looks at memory
	for _, name := range []string{"a", "b"} {
		if ph, _ := podPhase(t, cs, name); ph != corev1.PodRunning || len(entries(ledger, name, kubelet.ActionTerm)) != 0 {
			t.Errorf("pod %s within its requests was touched: phase %s, ledger %+v", name, ph, entries(ledger, name, ""))
		}
	}
	if !pressure.endsWith(corev1.ConditionTrue) {
		t.Errorf("MemoryPressure statuses %v, want it still True", pressure.statuses())
	}
}
