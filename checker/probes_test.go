package checker

import (
	"encoding/json"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/history"
)

// prObj is pod web-0 (UID a) bound to n1 with one container c, whose
// probes mods set.
func prObj(mods ...func(*corev1.Container)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "a"},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{Name: "c"}}}}
	for _, m := range mods {
		m(&p.Spec.Containers[0])
	}
	return p
}

func prExec(delay, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		InitialDelaySeconds: delay, PeriodSeconds: 1, FailureThreshold: failures}
}

func prWithStartup(c *corev1.Container)   { c.StartupProbe = prExec(0, 3) }
func prWithReadiness(c *corev1.Container) { c.ReadinessProbe = prExec(2, 1) }
func prWithLiveness(c *corev1.Container)  { c.LivenessProbe = prExec(0, 2) }

// prStore records pod p (its status as given) at t with resourceVersion rv.
func (b *hb) prStore(t float64, typ history.StoreEventType, rv uint64, p *corev1.Pod) *hb {
	data, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: typ, Resource: "pods", Namespace: p.Namespace,
		Name: p.Name, RV: strconv.FormatUint(rv, 10), Object: data, T: secs(t)})
	b.h.End = max(b.h.End, secs(t))
	return b
}

// prReadyAt records pod p at t with container c running and ready.
func (b *hb) prReadyAt(t float64, rv uint64, p *corev1.Pod) *hb {
	q := p.DeepCopy()
	q.Status.Phase = corev1.PodRunning
	q.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return b.prStore(t, modified, rv, q)
}

func probe(kind, result string) func(*history.LedgerEntry) {
	return func(e *history.LedgerEntry) { e.Probe, e.Result = kind, result }
}

func killReason(r string) func(*history.LedgerEntry) {
	return func(e *history.LedgerEntry) { e.Reason = r }
}

// prAnswer appends a probe answer of container c at t.
func (b *hb) prAnswer(t float64, kind, result string) *hb {
	return b.led(t, history.LedgerProbe, "n1", "web-0", "a", probe(kind, result))
}

// prClean is a correct life of a container with all three probes: the
// startup probe fails once then succeeds, readiness succeeds after its
// 2 s delay and the store shows the container ready after that, then
// liveness fails twice (its threshold), the kubelet kills the container
// for it, and it restarts and starts over.
func prClean() *hb {
	p := prObj(prWithStartup, prWithReadiness, prWithLiveness)
	b := (&hb{}).prStore(0.1, added, 10, p)
	b.led(1, start, "n1", "web-0", "a")
	b.prAnswer(2, history.ProbeStartup, history.ProbeFailure)
	b.prAnswer(3, history.ProbeStartup, history.ProbeSuccess)
	b.prAnswer(3.5, history.ProbeReadiness, history.ProbeSuccess)
	b.prAnswer(3.5, history.ProbeLiveness, history.ProbeSuccess)
	b.prReadyAt(4, 11, p)
	b.prAnswer(5, history.ProbeLiveness, history.ProbeFailure)
	b.prAnswer(5, history.ProbeReadiness, history.ProbeSuccess)
	b.prAnswer(6, history.ProbeLiveness, history.ProbeFailure)
	b.led(6.1, history.LedgerTerm, "n1", "web-0", "a", killReason(history.KillLivenessProbe), grace(2))
	b.led(6.5, exit, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.ExitCode = 143 })
	// A probe of the exited container (a race the runtime answers with
	// Failure) counts for nothing.
	b.prAnswer(6.6, history.ProbeLiveness, history.ProbeFailure)
	b.led(16.5, start, "n1", "web-0", "a")
	b.prAnswer(17.5, history.ProbeStartup, history.ProbeSuccess)
	b.prAnswer(18.5, history.ProbeReadiness, history.ProbeFailure)
	b.prAnswer(18.5, history.ProbeLiveness, history.ProbeSuccess)
	return b.until(30)
}

func TestProbesOk(t *testing.T) {
	res := mustVerdict(t, CheckProbes(bg, prClean().history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "11 probe answers", "2 container runs", "1 kill action", "1 container statuses ready")
	if res.Stats.Ops != 11 || res.Stats.Checked != 2 || res.Stats.Keys != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
}

func TestProbesNothingToJudge(t *testing.T) {
	b := (&hb{}).prStore(0.1, added, 10, prObj())
	b.led(1, start, "n1", "web-0", "a")
	mustVerdict(t, CheckProbes(bg, b.history(), Options{}), Unknown)
	// Answers about a pod the store lines do not hold.
	c := (&hb{}).led(1, start, "n1", "web-0", "a")
	c.prAnswer(2, history.ProbeLiveness, history.ProbeSuccess)
	res := mustVerdict(t, CheckProbes(bg, c.history(), Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "no probed container could be judged")
}

func TestProbesIllegal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mods  []func(*corev1.Container)
		build func(b *hb, p *corev1.Pod)
		words []string
	}{{
		name: "liveness before the startup probe succeeded",
		mods: []func(*corev1.Container){prWithStartup, prWithLiveness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeStartup, history.ProbeFailure)
			b.prAnswer(2, history.ProbeLiveness, history.ProbeSuccess)
		},
		words: []string{"its liveness probe", "before its startup probe succeeded"},
	}, {
		name: "the startup probe again after it succeeded",
		mods: []func(*corev1.Container){prWithStartup},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeStartup, history.ProbeSuccess)
			b.prAnswer(3, history.ProbeStartup, history.ProbeSuccess)
		},
		words: []string{"its startup probe again", "after it succeeded"},
	}, {
		name: "readiness before its initial delay",
		mods: []func(*corev1.Container){prWithReadiness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2.5, history.ProbeReadiness, history.ProbeSuccess)
		},
		words: []string{"its readiness probe", "1.500 s after its start", "initialDelaySeconds of 2"},
	}, {
		name: "a probe the spec does not have",
		mods: []func(*corev1.Container){prWithReadiness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(4, history.ProbeLiveness, history.ProbeSuccess)
		},
		words: []string{"a liveness probe", "its spec has none"},
	}, {
		name: "killed for liveness before its failure threshold",
		mods: []func(*corev1.Container){prWithLiveness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeLiveness, history.ProbeFailure)
			b.led(2.1, history.LedgerTerm, "n1", "web-0", "a", killReason(history.KillLivenessProbe))
		},
		words: []string{"term for reason LivenessProbe", "after 1 failure of its liveness probe in a row", "failureThreshold of 2"},
	}, {
		name: "a success in between starts the count over",
		mods: []func(*corev1.Container){prWithLiveness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeLiveness, history.ProbeFailure)
			b.prAnswer(3, history.ProbeLiveness, history.ProbeSuccess)
			b.prAnswer(4, history.ProbeLiveness, history.ProbeFailure)
			b.led(4.1, history.LedgerPreStopStart, "n1", "web-0", "a", killReason(history.KillLivenessProbe))
		},
		words: []string{"prestop-start for reason LivenessProbe", "after 1 failure"},
	}, {
		name: "killed for a startup probe it does not have",
		mods: []func(*corev1.Container){prWithLiveness},
		build: func(b *hb, _ *corev1.Pod) {
			b.led(4.1, history.LedgerTerm, "n1", "web-0", "a", killReason(history.KillStartupProbe))
		},
		words: []string{"for reason StartupProbe", "has no startup probe"},
	}, {
		name: "not killed after the failure threshold",
		mods: []func(*corev1.Container){prWithLiveness},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeLiveness, history.ProbeFailure)
			b.prAnswer(3, history.ProbeLiveness, history.ProbeFailure)
			b.until(20)
		},
		words: []string{"failed its liveness probe 2 times in a row", "was not killed within 5s"},
	}, {
		name: "probed on after the failure threshold",
		mods: []func(*corev1.Container){prWithStartup},
		build: func(b *hb, _ *corev1.Pod) {
			b.prAnswer(2, history.ProbeStartup, history.ProbeFailure)
			b.prAnswer(3, history.ProbeStartup, history.ProbeFailure)
			b.prAnswer(4, history.ProbeStartup, history.ProbeFailure)
			b.led(4.1, history.LedgerTerm, "n1", "web-0", "a", killReason(history.KillStartupProbe))
			b.prAnswer(4.5, history.ProbeStartup, history.ProbeFailure)
		},
		words: []string{"its startup probe at", "after it had failed its failureThreshold of 3 times in a row"},
	}, {
		name: "ready in the store before readiness succeeded",
		mods: []func(*corev1.Container){prWithReadiness},
		build: func(b *hb, p *corev1.Pod) {
			b.prReadyAt(2, 11, p)
			b.prAnswer(3.5, history.ProbeReadiness, history.ProbeSuccess)
		},
		words: []string{`container "c" of pod default/web-0 (UID a) ready at resourceVersion 11`, "first succeeded only at"},
	}, {
		name: "ready in the store, never probed",
		mods: []func(*corev1.Container){prWithReadiness},
		build: func(b *hb, p *corev1.Pod) {
			b.prReadyAt(5, 11, p)
			// Some other probe answer, so that the ledger has probes.
			b.led(5.5, history.LedgerProbe, "n1", "other", "b", probe(history.ProbeLiveness, history.ProbeSuccess))
		},
		words: []string{"its readiness probe had never succeeded"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := prObj(tc.mods...)
			b := (&hb{}).prStore(0.1, added, 10, p)
			b.led(1, start, "n1", "web-0", "a")
			tc.build(b, p)
			res := mustVerdict(t, CheckProbes(bg, b.history(), Options{}), Illegal)
			ev := res.Evidence[0]
			if ev.Key != "default/web-0" || len(ev.Ledger) == 0 || ev.Ledger[0].Action != start {
				t.Errorf("evidence %+v: want the pod's key and ledger from its start", ev)
			}
			mustMention(t, "evidence", ev.Description, append([]string{"LC-9: "}, tc.words...)...)
			mustMention(t, "summary", res.Summary, "broke LC-9")
		})
	}
}

// A kubelet crash between two answers excuses the rules that count (a
// new kubelet starts its probes over), not the others.
func TestProbesKubeletRestart(t *testing.T) {
	build := func() *hb {
		b := (&hb{}).prStore(0.1, added, 10, prObj(prWithStartup))
		b.led(1, start, "n1", "web-0", "a")
		b.prAnswer(2, history.ProbeStartup, history.ProbeSuccess)
		b.prAnswer(4, history.ProbeStartup, history.ProbeSuccess) // the new kubelet's
		return b.until(10)
	}
	b := build()
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: 1, Name: "kill-kubelet", Targets: []string{"kubelet/n1"},
		Start: secs(2.5), End: secs(3), Healed: true})
	res := mustVerdict(t, CheckProbes(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 answer not judged")
	// Without the crash the second startup probe is a violation.
	mustVerdict(t, CheckProbes(bg, build().history(), Options{}), Illegal)
	// A crash on another node excuses nothing.
	c := build()
	c.h.Nemesis = append(c.h.Nemesis, history.Interval{ID: 1, Name: "kill-kubelet", Targets: []string{"kubelet/n2"},
		Start: secs(2.5), End: secs(3), Healed: true})
	mustVerdict(t, CheckProbes(bg, c.history(), Options{}), Illegal)
}

// A kill due at the very end of the history is not judged.
func TestProbesKillDueAfterTheEnd(t *testing.T) {
	b := (&hb{}).prStore(0.1, added, 10, prObj(prWithLiveness))
	b.led(1, start, "n1", "web-0", "a")
	b.prAnswer(2, history.ProbeLiveness, history.ProbeFailure)
	b.prAnswer(3, history.ProbeLiveness, history.ProbeFailure)
	b.until(5)
	mustVerdict(t, CheckProbes(bg, b.history(), Options{}), Ok)
}
