package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

// Equal best scores share the load: each of three tied nodes is picked about
// a third of the time, and a strictly higher score always wins.
func TestSelectBestBreaksTiesUniformly(t *testing.T) {
	scores := []framework.NodeScore{{Name: "a", Score: 50}, {Name: "b", Score: 90}, {Name: "c", Score: 90}, {Name: "d", Score: 10}, {Name: "e", Score: 90}}
	var seq uint64
	intn := func(n int) int { // a deterministic stand-in for rand.IntN
		seq = seq*6364136223846793005 + 1442695040888963407
		return int((seq >> 33) % uint64(n))
	}
	picks := map[string]int{}
	for range 30000 {
		picks[scores[selectBest(scores, intn)].Name]++
	}
	if picks["a"]+picks["d"] != 0 {
		t.Fatalf("a lower score won: %v", picks)
	}
	for _, n := range []string{"b", "c", "e"} {
		if picks[n] < 9000 || picks[n] > 11000 {
			t.Errorf("tied node %s picked %d of 30000 times, want about 10000: %v", n, picks[n], picks)
		}
	}
	if got := selectBest([]framework.NodeScore{{Name: "x", Score: 1}, {Name: "y", Score: 2}}, intn); got != 1 {
		t.Errorf("selectBest picked %d, want the strictly best 1", got)
	}
}

// TestScheduleNextStartAdvances: on a cluster large enough that only part
// of the nodes is searched, the next cycle starts after the last node
// evaluated, wrapping around the node list.
func TestScheduleNextStartAdvances(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 200 {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("node-%03d", i)).Capacity("8", "32Gi", "110").Obj())
	}
	fw := newTestFramework(t, Config{}, nodes, nil)
	a := &algorithm{fw: fw, percentage: 50}
	for i, want := range []int{100, 0, 100} {
		pod := st.MakePod().Name(fmt.Sprintf("p-%d", i)).Req("100m", "").Obj()
		res, err := a.schedule(context.Background(), framework.NewCycleState(), pod)
		if err != nil {
			t.Fatal(err)
		}
		if res.EvaluatedNodes != 100 || a.nextStart != want {
			t.Fatalf("cycle %d: evaluated %d nodes, next start %d; want 100, %d", i, res.EvaluatedNodes, a.nextStart, want)
		}
	}
}
