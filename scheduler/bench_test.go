package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/st"
)

// BenchmarkSchedule measures pods scheduled per second against an in-memory
// snapshot: each placed pod is assumed on its node before the next cycle,
// and under churn each pod preempts a victim, which is removed.
func BenchmarkSchedule(b *testing.B) {
	for _, nodes := range []int{500, 5000} {
		for _, mode := range []string{"plain", "spread", "spread+preemption"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, mode), func(b *testing.B) {
				benchSchedule(b, nodes, mode)
			})
		}
	}
}

func benchSchedule(b *testing.B, numNodes int, mode string) {
	churn := mode == "spread+preemption"
	spread := mode != "plain"
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := 0; i < numNodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, st.MakeNode().Name(name).Label(podtopologyspread.LabelZone, fmt.Sprintf("zone-%d", i%10)).
			Capacity("8", "32Gi", "110").Obj())
		// Full nodes under churn; half-full otherwise.
		per := 4
		if churn {
			per = 8
		}
		for j := 0; j < per; j++ {
			pods = append(pods, st.MakePod().Name(fmt.Sprintf("bg-%d-%d", i, j)).Label("app", fmt.Sprintf("bg-%d", j)).
				Priority(int32(j)).Req("1", "1Gi").Node(name).Obj())
		}
	}
	fw := newTestFramework(b, Config{}, nodes, pods)
	snap := fw.Snapshot()
	algo := &algorithm{fw: fw}
	ctx := context.Background()
	// Once the cluster is full (or, under churn, has no victims left) it
	// starts over, off the clock, so any b.N fits.
	refill := func() {
		b.StopTimer()
		fw.SetSnapshot(framework.NewSnapshot(pods, nodes))
		snap = fw.Snapshot()
		b.StartTimer()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pw := st.MakePod().Name(fmt.Sprintf("p-%d", i)).Label("app", "web").Priority(1000).Req("1", "1Gi")
		if spread {
			pw = pw.Spread(1, podtopologyspread.LabelZone, corev1.DoNotSchedule, map[string]string{"app": "web"}).
				Spread(1, podtopologyspread.LabelHostname, corev1.ScheduleAnyway, map[string]string{"app": "web"})
		}
		pod := pw.Obj()
		state := framework.NewCycleState()
		res, err := algo.schedule(ctx, state, pod)
		node := res.Node
		var fe *FitError
		if err != nil && !churn && errors.As(err, &fe) {
			refill()
			i--
			continue
		}
		if err != nil {
			if !churn || !errors.As(err, &fe) {
				b.Fatalf("scheduling %s: %v", pod.Name, err)
			}
			pf, st := fw.RunPostFilterPlugins(ctx, state, pod, fe.Statuses)
			if !st.IsSuccess() && st.Message() == defaultpreemption.ReasonNoCandidates {
				refill()
				i--
				continue
			}
			if !st.IsSuccess() {
				b.Fatalf("preempting for %s: %v", pod.Name, st)
			}
			ni := snap.Get(pf.NominatedNodeName).Clone()
			for _, v := range pf.Victims {
				if v.Spec.Priority != nil && *v.Spec.Priority >= 1000 {
					b.Fatalf("victim %s of priority %d", v.Name, *v.Spec.Priority)
				}
				ni.RemovePod(v.UID)
			}
			snap.Set(ni)
			node = pf.NominatedNodeName
		}
		ni := snap.Get(node).Clone()
		ni.AddPod(framework.NewPodInfo(pod))
		snap.Set(ni)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}
