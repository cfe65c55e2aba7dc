package podtopologyspread_test

import (
	"context"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
)

const (
	zone = podtopologyspread.LabelZone
	host = podtopologyspread.LabelHostname
)

// newPlugin builds the plugin with args over a snapshot of nodes and pods.
func newPlugin(tb testing.TB, args podtopologyspread.Args, nodes []*corev1.Node, pods []*corev1.Pod) (*podtopologyspread.PodTopologySpread, *framework.Snapshot) {
	tb.Helper()
	fw, err := framework.NewFramework(nil, framework.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	snap := framework.NewSnapshot(pods, nodes)
	fw.SetSnapshot(snap)
	p, err := podtopologyspread.New(args)(fw)
	if err != nil {
		tb.Fatal(err)
	}
	return p.(*podtopologyspread.PodTopologySpread), snap
}

// filterResult is what PreFilter and Filter made of a pod: the nodes that
// passed, sorted, and whether PreFilter skipped.
type filterResult struct {
	Skipped  bool
	Feasible []string
	// Unresolvable lists, sorted, the nodes rejected for good.
	Unresolvable []string
}

func runFilter(tb testing.TB, pl *podtopologyspread.PodTopologySpread, snap *framework.Snapshot, pod *corev1.Pod) filterResult {
	tb.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	st := pl.PreFilter(ctx, state, pod, snap.List())
	var out filterResult
	switch {
	case st.IsSkip():
		out.Skipped = true
		for _, ni := range snap.List() {
			out.Feasible = append(out.Feasible, ni.Node().Name)
		}
	case !st.IsSuccess():
		tb.Fatalf("PreFilter: %v", st)
	default:
		for _, ni := range snap.List() {
			st := pl.Filter(ctx, state, pod, ni)
			switch st.Code() {
			case framework.Success:
				out.Feasible = append(out.Feasible, ni.Node().Name)
			case framework.UnschedulableAndUnresolvable:
				out.Unresolvable = append(out.Unresolvable, ni.Node().Name)
			case framework.Unschedulable:
			default:
				tb.Fatalf("Filter on %s: %v", ni.Node().Name, st)
			}
		}
	}
	sort.Strings(out.Feasible)
	sort.Strings(out.Unresolvable)
	return out
}

// runScore scores every node of snap and returns their names best first
// (ties by name), or nil if PreScore skipped.
func runScore(tb testing.TB, pl *podtopologyspread.PodTopologySpread, snap *framework.Snapshot, pod *corev1.Pod) []string {
	tb.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	nodes := snap.List()
	st := pl.PreScore(ctx, state, pod, nodes)
	if st.IsSkip() {
		return nil
	}
	if !st.IsSuccess() {
		tb.Fatalf("PreScore: %v", st)
	}
	scores := make([]framework.NodeScore, len(nodes))
	for i, ni := range nodes {
		s, st := pl.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			tb.Fatalf("Score on %s: %v", ni.Node().Name, st)
		}
		scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if st := pl.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
		tb.Fatalf("NormalizeScore: %v", st)
	}
	for _, s := range scores {
		if s.Score < 0 || s.Score > framework.MaxNodeScore {
			tb.Fatalf("score of %s is %d, outside 0..%d", s.Name, s.Score, framework.MaxNodeScore)
		}
	}
	sort.SliceStable(scores, func(i, j int) bool {
		if scores[i].Score != scores[j].Score {
			return scores[i].Score > scores[j].Score
		}
		return scores[i].Name < scores[j].Name
	})
	out := make([]string, len(scores))
	for i, s := range scores {
		out[i] = s.Name
	}
	return out
}

// runScores returns every node's normalized score, or nil if PreScore
// skipped.
func runScores(tb testing.TB, pl *podtopologyspread.PodTopologySpread, snap *framework.Snapshot, pod *corev1.Pod) map[string]int64 {
	tb.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	nodes := snap.List()
	if st := pl.PreScore(ctx, state, pod, nodes); st.IsSkip() {
		return nil
	} else if !st.IsSuccess() {
		tb.Fatalf("PreScore: %v", st)
	}
	scores := make([]framework.NodeScore, len(nodes))
	for i, ni := range nodes {
		s, st := pl.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			tb.Fatalf("Score on %s: %v", ni.Node().Name, st)
		}
		scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if st := pl.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
		tb.Fatalf("NormalizeScore: %v", st)
	}
	out := map[string]int64{}
	for _, s := range scores {
		out[s.Name] = s.Score
	}
	return out
}
