package checker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// poMod changes a hand-made pod object.
type poMod func(*poPod)

// poObj builds pod web-0 in namespace default with UID u: one app
// container c, restartPolicy Always, phase Pending, unbound.
func poObj(u string, mods ...poMod) *poPod {
	p := &poPod{}
	p.Metadata.Name, p.Metadata.Namespace, p.Metadata.UID = "web-0", "default", u
	p.Spec.RestartPolicy = poAlways
	p.Spec.Containers = []poContainer{{Name: "c"}}
	p.Status.Phase = poPending
	for _, m := range mods {
		m(p)
	}
	return p
}

func poPhaseIs(phase string) poMod { return func(p *poPod) { p.Status.Phase = phase } }
func poBound(node string) poMod {
	return func(p *poPod) {
		p.Spec.NodeName = node
		poSetCond(p, poCondScheduled, "True")
	}
}
func poPolicy(policy string) poMod { return func(p *poPod) { p.Spec.RestartPolicy = policy } }
func poReason(r string) poMod      { return func(p *poPod) { p.Status.Reason = r } }
func poCond(t, status string) poMod {
	return func(p *poPod) { poSetCond(p, t, status) }
}
func poGate(t string) poMod {
	return func(p *poPod) {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, poReadinessGate{t})
	}
}
func poDeleting(ts string, grace int64) poMod {
	return func(p *poPod) {
		p.Metadata.DeletionTimestamp, p.Metadata.DeletionGracePeriodSeconds = ts, &grace
	}
}
func poInits(names ...string) poMod {
	return func(p *poPod) {
		for _, n := range names {
			c := poContainer{Name: n}
			if strings.HasPrefix(n, "side") {
				c.RestartPolicy = poAlways
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
}

// poSetCond replaces or appends a condition.
func poSetCond(p *poPod, t, status string) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			p.Status.Conditions[i].Status = status
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, poCondition{Type: t, Status: status})
}

// poRunningCtr reports container c running (and ready or not).
func poRunningCtr(name string, ready bool) poMod {
	return func(p *poPod) {
		cs := poContainerStatus{Name: name, Ready: ready}
		cs.State.Running = &struct{}{}
		poSetStatus(p, cs)
	}
}

// poExitedCtr reports container c terminated with code.
func poExitedCtr(name string, code int) poMod {
	return func(p *poPod) {
		cs := poContainerStatus{Name: name}
		cs.State.Terminated = &poTerminated{code}
		poSetStatus(p, cs)
	}
}

// poBackingOff reports container c waiting in back-off after exiting with
// code.
func poBackingOff(name string, code int) poMod {
	return func(p *poPod) {
		cs := poContainerStatus{Name: name}
		cs.State.Waiting = &poWaiting{"CrashLoopBackOff"}
		cs.LastState.Terminated = &poTerminated{code}
		poSetStatus(p, cs)
	}
}

func poSetStatus(p *poPod, cs poContainerStatus) {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == cs.Name {
			p.Status.ContainerStatuses[i] = cs
			return
		}
	}
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
}

// poReady is what the kubelet reports for a pod whose containers all run
// and are ready.
func poReady(p *poPod) {
	p.Status.Phase = poRunning
	poSetCond(p, poCondInitialized, "True")
	poSetCond(p, poCondContainersReady, "True")
	poSetCond(p, poCondReady, "True")
	for _, c := range p.Spec.Containers {
		poRunningCtr(c.Name, true)(p)
	}
}

// poNotReady turns the readiness conditions False.
func poNotReady(p *poPod) {
	poSetCond(p, poCondContainersReady, "False")
	poSetCond(p, poCondReady, "False")
}

// pod records a store change of pod p at t seconds with resourceVersion rv.
func (b *hb) pod(t float64, typ history.StoreEventType, rv uint64, p *poPod) *hb {
	data, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: typ, Resource: "pods", Namespace: p.Metadata.Namespace,
		Name: p.Metadata.Name, RV: strconv.FormatUint(rv, 10), Object: data, T: secs(t)})
	if secs(t) > b.h.End {
		b.h.End = secs(t)
	}
	return b
}

const (
	added    = history.StoreAdded
	modified = history.StoreModified
	removed  = history.StoreDeleted
)

// poClean is the life of pod a as a correct cluster records it: created,
// bound to n1, running and ready, deleted with 30 s, deleted again with a
// shorter 10 s, failed once its container was killed, and removed.
func poClean() *hb {
	base := []poMod{poBound("n1")}
	with := func(mods ...poMod) *poPod { return poObj("a", append(append([]poMod{}, base...), mods...)...) }
	return (&hb{}).
		pod(1, added, 10, poObj("a")).
		pod(2, modified, 11, with()).
		led(3, start, "n1", "web-0", "a").
		pod(3.1, modified, 12, with(poReady)).
		pod(10, modified, 13, with(poReady, poDeleting("2030-01-01T00:00:40Z", 30))).
		pod(11, modified, 14, with(poReady, poDeleting("2030-01-01T00:00:21Z", 10))).
		pod(11.5, modified, 15, with(poReady, poDeleting("2030-01-01T00:00:21Z", 10), poNotReady)).
		led(12, exit, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.ExitCode = 143 }).
		pod(12.1, modified, 16, with(poDeleting("2030-01-01T00:00:21Z", 10), poPhaseIs(poFailed), poExitedCtr("c", 143), poNotReady)).
		pod(12.2, removed, 17, with(poDeleting("2030-01-01T00:00:21Z", 10), poPhaseIs(poFailed), poExitedCtr("c", 143), poNotReady))
}

func TestPhasesOk(t *testing.T) {
	res := mustVerdict(t, CheckPhases(bg, poClean().history(), Options{}), Ok)
	if res.Stats.Ops != 8 || res.Stats.Keys != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
	// The same changes recorded twice and out of order (a recorder that
	// resumed its watch) are judged in resourceVersion order.
	b := poClean()
	b.h.Store = append(b.h.Store, b.h.Store[2], b.h.Store[0])
	b.h.Store[0], b.h.Store[3] = b.h.Store[3], b.h.Store[0]
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Ok)
}

// The evidence of a lengthened grace lists the deletions behind it.
func TestPhasesLengthenedEvidence(t *testing.T) {
	bound := func(mods ...poMod) *poPod { return poObj("a", append([]poMod{poBound("n1")}, mods...)...) }
	b := (&hb{}).pod(1, added, 10, bound()).
		call(1.5, "workload", "get", "pods", "default", "web-0").
		deleted(1.9, "workload", "a", 10).
		pod(2, modified, 11, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
		deleted(2.9, "workload", "a", 30).
		pod(3, modified, 12, bound(poDeleting("2030-01-01T00:00:33Z", 30))).
		deleted(4, "workload", "a", 1)
	res := poIllegal(t, b.history(), "PS-3", "moved later")
	var graces []int64
	for _, c := range res.Evidence[0].API {
		graces = append(graces, *c.GracePeriodSeconds)
	}
	if diff := cmp.Diff([]int64{10, 30}, graces); diff != "" {
		t.Errorf("evidence deletions, by grace (-want +got):\n%s", diff)
	}
}

func TestPhasesNothingToJudge(t *testing.T) {
	b := (&hb{}).led(1, start, "n1", "web-0", "a")
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Unknown)
	if poHasPods(b.h.Store) || !poHasPods(poClean().h.Store) {
		t.Errorf("poHasPods is wrong")
	}
}

// poIllegal checks that h is Illegal for guarantee id, with evidence
// naming the pod and mentioning words.
func poIllegal(t *testing.T, h *history.History, id string, words ...string) Result {
	t.Helper()
	res := mustVerdict(t, CheckPhases(bg, h, Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" {
		t.Errorf("evidence key %q", ev.Key)
	}
	mustMention(t, "evidence", ev.Description, append([]string{id + ":", "UID a"}, words...)...)
	mustMention(t, "summary", res.Summary, id)
	return res
}

func TestPhasesIllegal(t *testing.T) {
	bound := func(mods ...poMod) *poPod { return poObj("a", append([]poMod{poBound("n1")}, mods...)...) }
	for _, tc := range []struct {
		name  string
		h     *hb
		id    string
		words []string
	}{{
		name: "unknown phase value",
		h:    (&hb{}).pod(1, added, 10, poObj("a", poPhaseIs("Starting"))),
		id:   "LC-1", words: []string{`"Starting"`, "rv 10"},
	}, {
		name: "phase goes back",
		h: (&hb{}).pod(1, added, 10, bound(poReady)).
			pod(2, modified, 11, bound(poPhaseIs(poPending))),
		id: "LC-2", words: []string{"back to Pending", "rv 11", "Running at ADDED rv 10"},
	}, {
		name: "terminal phase changes",
		h: (&hb{}).pod(1, added, 10, bound(poPhaseIs(poFailed), poExitedCtr("c", 1))).
			pod(2, modified, 11, bound(poPhaseIs(poSucceeded), poExitedCtr("c", 0), poPolicy(poNever))),
		id: "LC-2", words: []string{"phase Succeeded at MODIFIED rv 11 (t=2s) after the terminal phase Failed at ADDED rv 10"},
	}, {
		name: "running unbound",
		h:    (&hb{}).pod(1, added, 10, poObj("a", poPhaseIs(poRunning))),
		id:   "LC-2", words: []string{"Running", "nodeName is empty"},
	}, {
		name: "succeeded with a failed container",
		h:    (&hb{}).pod(1, added, 10, bound(poPolicy(poNever), poPhaseIs(poSucceeded), poExitedCtr("c", 2))),
		id:   "LC-2", words: []string{"Succeeded", "container c exited 2"},
	}, {
		name: "succeeded with a running container",
		h:    (&hb{}).pod(1, added, 10, bound(poPolicy(poOnFailure), poPhaseIs(poSucceeded), poRunningCtr("c", false))),
		id:   "LC-2", words: []string{"Succeeded", "container c runs"},
	}, {
		name: "succeeded though it restarts",
		h:    (&hb{}).pod(1, added, 10, bound(poPhaseIs(poSucceeded), poExitedCtr("c", 0))),
		id:   "LC-2", words: []string{"Succeeded", "restartPolicy is Always"},
	}, {
		name: "failed with a running container",
		h:    (&hb{}).pod(1, added, 10, bound(poPhaseIs(poFailed), poRunningCtr("c", true))),
		id:   "LC-2", words: []string{"Failed", "container c runs"},
	}, {
		name: "failed for nothing",
		h:    (&hb{}).pod(1, added, 10, bound(poPolicy(poNever), poPhaseIs(poFailed), poExitedCtr("c", 0))),
		id:   "LC-2", words: []string{"Failed", "no container failed"},
	}, {
		name: "rebound",
		h: (&hb{}).pod(1, added, 10, bound()).
			pod(2, modified, 11, poObj("a", poBound("n2"))),
		id: "LC-3", words: []string{`"n2"`, `"n1"`, "rv 11", "rv 10"},
	}, {
		name: "unbound again",
		h: (&hb{}).pod(1, added, 10, bound()).
			pod(2, modified, 11, poObj("a")),
		id: "LC-3", words: []string{`""`, `"n1"`},
	}, {
		name: "deletion undone",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:40Z", 30))).
			pod(2, modified, 11, bound()),
		id: "PS-2", words: []string{"deletionTimestamp", "is gone at MODIFIED rv 11"},
	}, {
		name: "deleted UID comes back",
		h: (&hb{}).pod(1, added, 10, bound()).
			pod(2, removed, 11, bound()).
			pod(3, modified, 12, bound()),
		id: "PS-2", words: []string{"came back at MODIFIED rv 12", "deleted at DELETED rv 11"},
	}, {
		// The planted bug "API lets a second delete lengthen the grace".
		name: "second deletion lengthens the grace",
		h: (&hb{}).pod(1, added, 10, bound()).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(3, modified, 12, bound(poDeleting("2030-01-01T00:00:33Z", 30))),
		id: "PS-3", words: []string{"moved later", "00:00:12Z", "00:00:33Z", "rv 12"},
	}, {
		// Only a shortening to at most 1 s may move an expired deadline.
		name: "deadline moves later with a shorter grace above 1 s",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:05:40Z", 2))),
		id: "PS-3", words: []string{"moved later", "00:00:12Z", "00:05:40Z"},
	}, {
		name: "deadline moves later with grace 1 that is no shorter",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 1))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:05:40Z", 1))),
		id: "PS-3", words: []string{"moved later"},
	}, {
		name: "grace grows with the same deadline",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:00:12Z", 30))),
		id: "PS-3", words: []string{"grew from 10 s", "to 30 s"},
	}, {
		name: "unknown condition type",
		h:    (&hb{}).pod(1, added, 10, bound(poCond("Happy", "True"))),
		id:   "LC-7", words: []string{`"Happy"`},
	}, {
		name: "condition status",
		h:    (&hb{}).pod(1, added, 10, bound(poCond(poCondInitialized, "Yes"))),
		id:   "LC-7", words: []string{`"Yes"`},
	}, {
		name: "scheduled but unbound",
		h:    (&hb{}).pod(1, added, 10, poObj("a", poCond(poCondScheduled, "True"))),
		id:   "LC-7", words: []string{"PodScheduled True", "nodeName is empty"},
	}, {
		name: "bound without PodScheduled",
		h: (&hb{}).pod(1, added, 10, poObj("a")).
			pod(2, modified, 11, poObj("a", func(p *poPod) { p.Spec.NodeName = "n1" })),
		id: "LC-7", words: []string{"bound to n1", "PodScheduled absent"},
	}, {
		name: "running before initialized",
		h:    (&hb{}).pod(1, added, 10, bound(poReady, poCond(poCondInitialized, "False"))),
		id:   "LC-7", words: []string{"app container c runs", "Initialized is False"},
	}, {
		name: "ready without containers ready",
		h:    (&hb{}).pod(1, added, 10, bound(poReady, poCond(poCondContainersReady, "False"))),
		id:   "LC-8", words: []string{"Ready True", "ContainersReady is False"},
	}, {
		name: "ready with a container not ready",
		h:    (&hb{}).pod(1, added, 10, bound(poReady, poRunningCtr("c", false))),
		id:   "LC-8", words: []string{"container c is not ready"},
	}, {
		name: "ready while pending",
		h:    (&hb{}).pod(1, added, 10, bound(poReady, poPhaseIs(poPending))),
		id:   "LC-8", words: []string{"Ready True", "phase Pending"},
	}, {
		name: "ready with a gate never true",
		h:    (&hb{}).pod(1, added, 10, bound(poGate("example.com/gate"), poReady)),
		id:   "LC-8", words: []string{"readiness gate example.com/gate is absent"},
	}} {
		t.Run(tc.name, func(t *testing.T) { poIllegal(t, tc.h.history(), tc.id, tc.words...) })
	}
}

// Edge cases a correct cluster produces.
func TestPhasesEdges(t *testing.T) {
	bound := func(mods ...poMod) *poPod { return poObj("a", append([]poMod{poBound("n1")}, mods...)...) }
	for _, tc := range []struct {
		name string
		h    *hb
	}{{
		name: "terminal then deleted",
		h: (&hb{}).pod(1, added, 10, bound(poPolicy(poOnFailure), poReady)).
			pod(2, modified, 11, bound(poPolicy(poOnFailure), poPhaseIs(poSucceeded), poExitedCtr("c", 0), poNotReady)).
			pod(3, removed, 12, bound(poPolicy(poOnFailure), poPhaseIs(poSucceeded), poExitedCtr("c", 0), poNotReady)),
	}, {
		name: "unknown phase comes and goes",
		h: (&hb{}).pod(1, added, 10, bound(poReady)).
			pod(2, modified, 11, bound(poReady, poPhaseIs(poUnknown), poNotReady)).
			pod(3, modified, 12, bound(poReady)),
	}, {
		name: "succeeded while being deleted, after a back-off",
		h: (&hb{}).pod(1, added, 10, bound(poPhaseIs(poRunning), poBackingOff("c", 0))).
			pod(2, modified, 11, bound(poPhaseIs(poSucceeded), poBackingOff("c", 0), poDeleting("2030-01-01T00:00:09Z", 5))),
	}, {
		name: "failed while being deleted before it started",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:09Z", 5))).
			pod(2, modified, 11, bound(poPhaseIs(poFailed), poDeleting("2030-01-01T00:00:09Z", 5))),
	}, {
		name: "failed for a lost node while it still runs (LC-4)",
		h: (&hb{}).pod(1, added, 10, bound(poReady)).
			pod(2, modified, 11, bound(poReady, poPhaseIs(poFailed), poReason(poReasonNodeLost), poCond(poCondNodeDown, "True"))),
	}, {
		name: "evicted",
		h: (&hb{}).pod(1, added, 10, bound(poReady)).
			pod(2, modified, 11, bound(poPhaseIs(poFailed), poReason(poReasonEvicted), poExitedCtr("c", 137), poNotReady)),
	}, {
		name: "a stale gate: True before, Ready reported from an old view",
		h: (&hb{}).pod(1, added, 10, bound(poGate("example.com/gate"), poCond("example.com/gate", "True"), poReady)).
			pod(2, modified, 11, bound(poGate("example.com/gate"), poCond("example.com/gate", "False"), poReady)),
	}, {
		name: "a gate False: ContainersReady True, Ready False",
		h:    (&hb{}).pod(1, added, 10, bound(poGate("example.com/gate"), poReady, poCond(poCondReady, "False"))),
	}, {
		name: "a second deletion with a longer grace changes nothing",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:00:12Z", 10), poNotReady)),
	}, {
		name: "a shorter grace with the deadline unchanged",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:00:12Z", 5))),
	}, {
		// kube-apiserver: a shorter grace whose deadline has already passed
		// moves the deadline to the moment of the second deletion, with 1 s.
		name: "a shorter grace after the deadline passed: now, with 1 s",
		h: (&hb{}).pod(1, added, 10, bound(poDeleting("2030-01-01T00:00:12Z", 10))).
			pod(2, modified, 11, bound(poDeleting("2030-01-01T00:05:40Z", 1))),
	}, {
		name: "created bound by admin",
		h:    (&hb{}).pod(1, added, 10, poObj("a", func(p *poPod) { p.Spec.NodeName = "n1" })),
	}} {
		t.Run(tc.name, func(t *testing.T) { mustVerdict(t, CheckPhases(bg, tc.h.history(), Options{}), Ok) })
	}
}

// Lost store events: two recorded changes need not be consecutive, so
// binding is not judged by its change.
func TestPhasesLostEvents(t *testing.T) {
	b := (&hb{}).pod(1, added, 10, poObj("a")).
		pod(2, modified, 14, poObj("a", func(p *poPod) { p.Spec.NodeName = "n1" }))
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Illegal)
	b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: "store events lost", Attrs: map[string]string{"resource": "pods"}})
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Ok)
}

func TestPhasesEvidenceBound(t *testing.T) {
	b := &hb{}
	for i := range 10 {
		u := "u" + strconv.Itoa(i)
		b.pod(float64(i), added, uint64(10+i), poObj(u, poPhaseIs("Bogus")))
	}
	res := mustVerdict(t, CheckPhases(bg, b.history(), Options{MaxEvidence: 2}), Illegal)
	if len(res.Evidence) != 2 || !strings.Contains(res.Evidence[0].Description, "UID u0") {
		t.Errorf("evidence %+v, want the first 2 pods", res.Evidence)
	}
	mustMention(t, "summary", res.Summary, "10 violations in 10 pods")
}
