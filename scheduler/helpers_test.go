package scheduler

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// newTestFramework builds the default profile over a snapshot of nodes and
// pods.
func newTestFramework(tb testing.TB, cfg Config, nodes []*corev1.Node, pods []*corev1.Pod, pdbs ...*policyv1.PodDisruptionBudget) *framework.Framework {
	tb.Helper()
	cfg.setDefaults()
	fw, err := framework.NewFramework(Plugins(cfg), framework.Options{
		PodDisruptionBudgets: func() []*policyv1.PodDisruptionBudget { return pdbs },
	})
	if err != nil {
		tb.Fatal(err)
	}
	fw.SetSnapshot(framework.NewSnapshot(pods, nodes))
	return fw
}

// feasible lists, sorted, the nodes that pass every filter for pod.
func feasible(tb testing.TB, fw *framework.Framework, pod *corev1.Pod) []string {
	tb.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	if st := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		if st.Code() == framework.Error {
			tb.Fatalf("PreFilter: %v", st)
		}
		return nil
	}
	var out []string
	for _, ni := range fw.Snapshot().List() {
		st := fw.RunFilterPlugins(ctx, state, pod, ni)
		if st.Code() == framework.Error {
			tb.Fatalf("Filter on %s: %v", ni.Node().Name, st)
		}
		if st.IsSuccess() {
			out = append(out, ni.Node().Name)
		}
	}
	sort.Strings(out)
	return out
}

// scheduleIn runs a whole cycle and returns the chosen node, or "" with the
// error.
func scheduleIn(tb testing.TB, fw *framework.Framework, pod *corev1.Pod) (string, error) {
	tb.Helper()
	a := &algorithm{fw: fw, percentage: 100}
	res, err := a.schedule(context.Background(), framework.NewCycleState(), pod)
	return res.Node, err
}
