package interpodaffinity_test

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/interpodaffinity"
	"github.com/podsafe/podsafe/scheduler/st"
)

const (
	zone = "topology.kubernetes.io/zone"
	host = "kubernetes.io/hostname"
)

// fourNodes are n1, n2 in zone a and n3, n4 in zone b.
func fourNodes() []*corev1.Node {
	return []*corev1.Node{
		st.MakeNode().Name("n1").Label(zone, "a").Obj(),
		st.MakeNode().Name("n2").Label(zone, "a").Obj(),
		st.MakeNode().Name("n3").Label(zone, "b").Obj(),
		st.MakeNode().Name("n4").Label(zone, "b").Obj(),
	}
}

// app is a running pod labelled app=value on node.
func app(name, value, node string) *corev1.Pod {
	return st.MakePod().Name(name).Label("app", value).Node(node).Obj()
}

// newFramework runs only the plugin over a snapshot of nodes and pods, with
// namespaces labelled as in nsLabels.
func newFramework(tb testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, nsLabels map[string]labels.Set) *framework.Framework {
	tb.Helper()
	fw, err := framework.NewFramework([]framework.PluginSpec{{Factory: interpodaffinity.New}}, framework.Options{
		NamespaceLabels: func(ns string) labels.Set { return nsLabels[ns] },
	})
	if err != nil {
		tb.Fatal(err)
	}
	fw.SetSnapshot(framework.NewSnapshot(pods, nodes))
	return fw
}

// filterResult is what the filter made of a pod: the nodes that passed,
// those rejected for good and those rejected so that preemption may help,
// each sorted; Skipped when PreFilter had nothing to check.
type filterResult struct {
	Skipped       bool
	Feasible      []string
	Unresolvable  []string
	Unschedulable []string
}

func runFilter(tb testing.TB, fw *framework.Framework, state *framework.CycleState, pod *corev1.Pod) filterResult {
	tb.Helper()
	ctx := context.Background()
	var out filterResult
	out.Skipped = state.SkipFilter(interpodaffinity.Name)
	for _, ni := range fw.Snapshot().List() {
		st := fw.RunFilterPlugins(ctx, state, pod, ni)
		name := ni.Node().Name
		switch st.Code() {
		case framework.Success:
			out.Feasible = append(out.Feasible, name)
		case framework.UnschedulableAndUnresolvable:
			out.Unresolvable = append(out.Unresolvable, name)
		case framework.Unschedulable:
			out.Unschedulable = append(out.Unschedulable, name)
		default:
			tb.Fatalf("Filter on %s: %v", name, st)
		}
	}
	sort.Strings(out.Feasible)
	sort.Strings(out.Unresolvable)
	sort.Strings(out.Unschedulable)
	return out
}

// preFilter runs PreFilter and fails the test on an error.
func preFilter(tb testing.TB, fw *framework.Framework, pod *corev1.Pod) *framework.CycleState {
	tb.Helper()
	state := framework.NewCycleState()
	if st := fw.RunPreFilterPlugins(context.Background(), state, pod); !st.IsSuccess() {
		tb.Fatalf("PreFilter: %v", st)
	}
	return state
}
