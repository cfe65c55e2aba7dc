package workload

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/history"
)

func TestPriorityTiers(t *testing.T) {
	never := 0
	for _, tier := range priorityTiers {
		if tier.value > apiserver.HighestUserPriority || tier.value <= 0 {
			t.Errorf("class %s value %d outside the user range", tier.class, tier.value)
		}
		if tier.policy == corev1.PreemptNever {
			never++
		}
	}
	if never != 1 {
		t.Errorf("%d classes never preempt, want exactly one", never)
	}
	for _, b := range priorityBudgets {
		found := false
		for _, tier := range priorityTiers {
			found = found || tier.tier == b.tier
		}
		if !found {
			t.Errorf("budget %s selects no tier", b.tier)
		}
	}
}

func TestPriorityPods(t *testing.T) {
	w := &Priority{}
	w.defaults(3)
	if w.Pods != 12 {
		t.Errorf("3 nodes give %d pod slots, want 12", w.Pods)
	}
	classes := map[string]int{}
	var demand resource.Quantity
	for slot := range w.Pods {
		for variant := range uint64(50) {
			pod, value := w.pod(slot, variant)
			if pod.Name != "prio-"+strconv.Itoa(slot) || pod.Namespace != w.Namespace {
				t.Fatalf("slot %d: pod %s/%s", slot, pod.Namespace, pod.Name)
			}
			var tier *priorityTier
			for i := range priorityTiers {
				if priorityTiers[i].class == pod.Spec.PriorityClassName {
					tier = &priorityTiers[i]
				}
			}
			if tier == nil || pod.Labels["tier"] != tier.tier {
				t.Fatalf("%s: class %q, tier label %q", value, pod.Spec.PriorityClassName, pod.Labels["tier"])
			}
			classes[tier.class]++
			if g := *pod.Spec.TerminationGracePeriodSeconds; g < 1 || g > w.TerminationGrace {
				t.Fatalf("%s: grace %d outside 1..%d", value, g, w.TerminationGrace)
			}
			cpu := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
			if cpu.Cmp(resource.MustParse("2")) < 0 || cpu.Cmp(resource.MustParse("4")) > 0 {
				t.Fatalf("%s: cpu %s outside 2..4", value, cpu.String())
			}
			if variant == 0 {
				demand.Add(cpu)
			}
			checkScripts(t, pod.Annotations, pod.Spec)
			again, _ := w.pod(slot, variant)
			if diff := cmp.Diff(pod, again); diff != "" {
				t.Fatalf("the same variant built different pods (-first +second):\n%s", diff)
			}
		}
	}
	if len(classes) != len(priorityTiers) {
		t.Errorf("classes drawn: %v, want all %d", classes, len(priorityTiers))
	}
	// The pods must not fit at once on 3 nodes of 8 CPUs: higher
	// priorities have to preempt.
	if capacity := resource.MustParse("24"); demand.Cmp(capacity) <= 0 {
		t.Errorf("the pod slots ask for %s CPUs, not more than the 24 of 3 nodes", demand.String())
	}
	// The budgets select the pods of their tier.
	for _, b := range priorityBudgets {
		sel := labels.SelectorFromSet(labels.Set{labelApp: "priority", "tier": b.tier})
		matched := false
		for variant := range uint64(50) {
			pod, _ := w.pod(0, variant)
			matched = matched || sel.Matches(labels.Set(pod.Labels))
		}
		if !matched {
			t.Errorf("budget %s matches none of the pods", b.tier)
		}
	}
}

func TestPriorityValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Priority
		ok   bool
	}{
		{"defaults", Priority{}, true},
		{"bad cpu", Priority{CPUs: []string{"lots"}}, false},
		{"negative lifetime", Priority{Lifetime: -1}, false},
		{"zero class weights", Priority{ClassWeights: [4]int{0, 0, 0, 0}}, true}, // zero means default
	} {
		if err := tc.w.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// fakeProc is process worker of workers on cs, recording into a history in
// a temporary directory, on clock clk.
func fakeProc(t *testing.T, cs kubernetes.Interface, worker, workers int, clk clock.WithTicker) *proc {
	t.Helper()
	rec, err := history.Create(filepath.Join(t.TempDir(), "history.jsonl"), history.Meta{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	next := &atomic.Int64{}
	next.Store(int64(workers))
	return &proc{workload: "test", worker: worker, workers: workers, pid: worker, nextPID: next, cs: cs,
		rec: rec, stats: &Stats{}, rng: rand.New(rand.NewPCG(1, uint64(worker)+1)), clock: clk, timeout: time.Second}
}

// podNames lists the pods of ns in cs, sorted.
func podNames(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// By default a process fills every slot it owns before any time passes:
// the nodes are oversubscribed at once. Gradual waits for the pace.
func TestPriorityOpeningBurst(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gradual bool
		want    []string
	}{
		{"burst", false, []string{"prio-1", "prio-4", "prio-7", "prio-10"}},
		{"gradual", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &Priority{Gradual: tc.gradual}
			w.defaults(3)
			cs := fake.NewClientset()
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			p := fakeProc(t, cs, 1, 3, clk)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); w.loop(ctx, p) }()
			// The burst needs no clock; the gradual loop waits on the
			// frozen clock for its first operation.
			want := sortedCopy(tc.want)
			deadline := time.Now().Add(5 * time.Second)
			for len(podNames(t, cs, w.Namespace)) < len(want) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !tc.gradual {
				for !clk.HasWaiters() && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
			}
			time.Sleep(50 * time.Millisecond)
			got := podNames(t, cs, w.Namespace)
			cancel()
			<-done
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pods created before any time passed (-want +got):\n%s", diff)
			}
		})
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
