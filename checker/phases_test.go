package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// poInitPod is pod a with init containers names (a "side…" name is a
// sidecar), bound to n1.
func poInitPod(names ...string) *hb {
	return (&hb{}).pod(0.5, added, 10, poObj("a", poBound("n1"), poInits(names...)))
}

func poLed(b *hb, t float64, action history.LedgerAction, container string, code int) *hb {
	return b.led(t, action, "n1", "web-0", "a", ctr(container), func(e *history.LedgerEntry) { e.ExitCode = code })
}

func TestPhasesInitOrder(t *testing.T) {
	ok := poInitPod("init-a", "init-b")
	poLed(ok, 1, start, "init-a", 0)
	poLed(ok, 2, exit, "init-a", 1) // fails, and is retried
	poLed(ok, 12, start, "init-a", 0)
	poLed(ok, 13, exit, "init-a", 0)
	poLed(ok, 14, start, "init-b", 0)
	poLed(ok, 15, exit, "init-b", 0)
	poLed(ok, 16, start, "c", 0)
	res := mustVerdict(t, CheckPhases(bg, ok.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "4 container starts")

	for _, tc := range []struct {
		name  string
		build func(b *hb)
		words []string
	}{{
		name: "app before the init containers",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "c", 0)
		},
		words: []string{"container c started", "before init container init-b ever ran"},
	}, {
		name: "second init while the first runs",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, start, "init-b", 0)
		},
		words: []string{"container init-b started", "while init container init-a", "still ran"},
	}, {
		name: "app after a failed init container",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "init-b", 0)
			poLed(b, 4, exit, "init-b", 1)
			poLed(b, 5, start, "c", 0)
		},
		words: []string{"container c started", "init-b's last run exited 1"},
	}, {
		name: "init container again while the app runs",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "init-b", 0)
			poLed(b, 4, exit, "init-b", 0)
			poLed(b, 5, start, "c", 0)
			poLed(b, 6, start, "init-b", 0)
		},
		words: []string{"container init-b started", "while app container c"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := poInitPod("init-a", "init-b")
			tc.build(b)
			res := poIllegal(t, b.history(), "LC-10", tc.words...)
			if len(res.Evidence[0].Ledger) == 0 {
				t.Errorf("evidence without ledger entries")
			}
		})
	}
}

// A sidecar (an init container with restartPolicy Always) need only have
// started before the next container; it runs on beside them.
func TestPhasesInitSidecar(t *testing.T) {
	ok := poInitPod("side-proxy", "init-a")
	poLed(ok, 1, start, "side-proxy", 0)
	poLed(ok, 2, start, "init-a", 0)
	poLed(ok, 3, exit, "init-a", 0)
	poLed(ok, 4, start, "c", 0)
	poLed(ok, 5, exit, "side-proxy", 1)
	poLed(ok, 6, start, "side-proxy", 0)
	mustVerdict(t, CheckPhases(bg, ok.history(), Options{}), Ok)

	bad := poInitPod("side-proxy", "init-a")
	poLed(bad, 1, start, "init-a", 0)
	poLed(bad, 2, exit, "init-a", 0)
	poLed(bad, 3, start, "c", 0)
	poIllegal(t, bad.history(), "LC-10", "container init-a started", "before the sidecar init container side-proxy ever started")
}

// After a power loss the new machine runs the pod afresh: init containers
// first again.
func TestPhasesInitAfterPowerOff(t *testing.T) {
	b := poInitPod("init-a")
	poLed(b, 1, start, "init-a", 0)
	poLed(b, 2, exit, "init-a", 0)
	poLed(b, 3, start, "c", 0)
	poLed(b, 4, history.LedgerPowerOff, "c", 0)
	poLed(b, 4, exit, "c", 137)
	poLed(b, 10, start, "init-a", 0)
	poLed(b, 11, exit, "init-a", 0)
	poLed(b, 12, start, "c", 0)
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Ok)
}

// Nothing starts in a pod after the store recorded it terminal, unless the
// node controller failed it for a lost node (LC-4).
func TestPhasesStartAfterTerminal(t *testing.T) {
	build := func(reason string) *hb {
		b := (&hb{}).pod(0.5, added, 10, poObj("a", poBound("n1"), poPolicy(poOnFailure)))
		poLed(b, 1, start, "c", 0)
		poLed(b, 2, exit, "c", 0)
		phase := poSucceeded
		if reason == poReasonNodeLost {
			phase = poFailed
		}
		b.pod(3, modified, 11, poObj("a", poBound("n1"), poPolicy(poOnFailure), poPhaseIs(phase), poExitedCtr("c", 0), poReason(reason)))
		return poLed(b, 4, start, "c", 0)
	}
	poIllegal(t, build("").history(), "LC-2", "container c started", "after the store recorded the pod Succeeded at MODIFIED rv 11")
	mustVerdict(t, CheckPhases(bg, build(poReasonNodeLost).history(), Options{}), Ok)
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

// poSample is a pod object as the API server stores it, terminating, with
// init containers, a sidecar and a readiness gate.
const poSample = `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"podsafe.io/script.init-a":"run=1s"},` +
	`"creationTimestamp":"2026-11-22T08:25:09Z","deletionGracePeriodSeconds":7,"deletionTimestamp":"2026-11-22T08:26:00Z",` +
	`"generation":2,"labels":{"app":"lifecycle"},"name":"lc-1","namespace":"podsafe-lifecycle","resourceVersion":"225",` +
	`"uid":"17a7998d-cadf-4ad3-9736-daccf2e3f8fb"},"spec":{"initContainers":[{"name":"init-a","image":"podsafe.io/sim:1",` +
	`"resources":{},"terminationMessagePath":"/dev/termination-log"},{"name":"side-b","image":"podsafe.io/sim:1","restartPolicy":"Always"}],` +
	`"containers":[{"name":"app","image":"podsafe.io/sim:1","resources":{"requests":{"memory":"1Mi"}},"command":["podsafe-script","run=1s"]}],` +
	`"restartPolicy":"Always","terminationGracePeriodSeconds":4,"nodeName":"node-0","readinessGates":[{"conditionType":"podsafe.io/gate"}],` +
	`"priority":0,"enableServiceLinks":true},"status":{"phase":"Running","reason":"","conditions":[{"type":"PodScheduled","status":"True",` +
	`"lastProbeTime":null,"lastTransitionTime":"2026-11-22T08:25:09Z"},{"type":"Ready","status":"False","reason":"ReadinessGatesNotReady"}],` +
	`"startTime":"2026-11-22T08:25:09Z","initContainerStatuses":[{"name":"init-a","state":{"terminated":{"exitCode":0,"reason":"Completed",` +
	`"startedAt":"2026-11-22T08:25:09Z","finishedAt":"2026-11-22T08:25:10Z","containerID":"sim://node-0-15"}},"lastState":{},"ready":true,` +
	`"restartCount":0},{"name":"side-b","state":{"running":{"startedAt":"2026-11-22T08:25:10Z"}},"lastState":{"terminated":{"exitCode":1}},"ready":true}],` +
	`"containerStatuses":[{"name":"app","state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off \"10s\""}},` +
	`"lastState":{"terminated":{"exitCode":143}},"ready":false,"restartCount":3,"started":false}],"qosClass":"BestEffort"}}`

// The scanner reads what encoding/json reads, and leaves what it does not
// expect to encoding/json.
func TestPoDecode(t *testing.T) {
	fast := func(data string) bool {
		var p poPod
		s := poScanner{d: []byte(data)}
		return s.pod(&p) == nil
	}
	for _, tc := range []struct {
		name string
		data string
		fast bool // the scanner alone reads it
	}{
		{"stored pod", poSample, true},
		{"indented", strings.ReplaceAll(strings.ReplaceAll(poSample, ",", ",\n  "), ":", " : "), true},
		{"escaped strings", `{"metadata":{"name":"a\u002db","uid":"x\"y"},"status":{"phase":"Run\u006eing"}}`, true},
		{"nulls", `{"metadata":null,"spec":{"containers":null,"nodeName":null},"status":{"containerStatuses":[{"name":"c","state":{"running":null,"terminated":{"exitCode":2}}}]}}`, true},
		{"empty", `{}`, true},
		{"empty lists", `{"spec":{"containers":[],"readinessGates":[]},"status":{"conditions":[],"containerStatuses":[{"state":{}}]}}`, true},
		{"repeated keys", `{"status":{"phase":"Pending","phase":"Running","conditions":[{"type":"Ready"}],"conditions":[]}}`, true},
		{"escaped key", `{"metadata":{"n\u0061me":"a"}}`, false},
		{"number for a string", `{"status":{"phase":3}}`, false},
		{"float exit code", `{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1.5}}}]}}`, false},
		{"trailing garbage", poSample + `}`, true},
		{"not an object", `[1,2]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got poPod
			wantErr := json.Unmarshal([]byte(tc.data), &want)
			gotErr := poDecode([]byte(tc.data), &got)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("error %v, encoding/json says %v", gotErr, wantErr)
			}
			if wantErr == nil {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("decoded (-encoding/json +poDecode):\n%s", diff)
				}
			}
			if f := fast(tc.data); f != tc.fast {
				t.Errorf("read by the scanner alone: %v, want %v", f, tc.fast)
			}
		})
	}
	var p poPod
	if err := poDecode([]byte(poSample), &p); err != nil || p.Metadata.UID == "" || *p.Metadata.DeletionGracePeriodSeconds != 7 ||
		len(p.Spec.InitContainers) != 2 || p.Spec.InitContainers[1].RestartPolicy != poAlways || p.Spec.ReadinessGates[0].ConditionType != "podsafe.io/gate" ||
		p.Status.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" || p.Status.ContainerStatuses[0].LastState.Terminated.ExitCode != 143 {
		t.Errorf("decoded %+v, %v", p, err)
	}
}

// poSynthetic is a history of pods, each as a correct cluster records it:
// six store changes (created, bound, running and ready, deleted with 30 s,
// failed once killed, removed) in the stored JSON form, and six ledger
// entries (a crash, a restart after the back-off, TERM, KILL, the exit).
func poSynthetic(pods int) *history.History {
	h := &history.History{}
	rv := uint64(1)
	obj := func(name, uid, node, phase, del string, ready bool, ctr string) []byte {
		var b strings.Builder
		fmt.Fprintf(&b, `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"podsafe.io/script.app":"crash-loop"},`+
			`"creationTimestamp":"2030-01-01T00:00:00Z",%s"generation":1,"labels":{"app":"replicas"},"name":%q,"namespace":"default",`+
			`"resourceVersion":"%d","uid":%q},"spec":{"containers":[{"name":"app","image":"podsafe.io/sim:1","resources":{},`+
			`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],`+
			`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeName":%q,"securityContext":{},`+
			`"schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},`+
			`"status":{"phase":%q,"conditions":[`, del, name, rv, uid, node, phase)
		if node != "" {
			b.WriteString(`{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:00Z"}`)
		}
		if ctr != "" {
			st := map[bool]string{true: "True", false: "False"}[ready]
			fmt.Fprintf(&b, `,{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:00Z"},`+
				`{"type":"ContainersReady","status":%q,"lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:01Z"},`+
				`{"type":"Ready","status":%q,"lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:01Z"}],"startTime":"2030-01-01T00:00:00Z",`+
				`"containerStatuses":[{"name":"app","state":%s,"lastState":{},"ready":%v,"restartCount":1,"image":"podsafe.io/sim:1",`+
				`"imageID":"","containerID":"sim://n-1","started":%v}],"qosClass":"BestEffort"}}`, st, st, ctr, ready, ready)
		} else {
			b.WriteString(`],"qosClass":"BestEffort"}}`)
		}
		return []byte(b.String())
	}
	running := `{"running":{"startedAt":"2030-01-01T00:00:00Z"}}`
	killed := `{"terminated":{"exitCode":137,"reason":"Error","startedAt":"2030-01-01T00:00:00Z","finishedAt":"2030-01-01T00:00:40Z","containerID":"sim://n-1"}}`
	del := `"deletionGracePeriodSeconds":30,"deletionTimestamp":"2030-01-01T00:01:00Z",`
	for i := range pods {
		name, uid, node := fmt.Sprintf("web-%d", i), fmt.Sprintf("uid-%08d", i), fmt.Sprintf("n%d", i%50)
		t := float64(i) * 0.001
		add := func(typ history.StoreEventType, data []byte) {
			h.Store = append(h.Store, history.StoreEvent{Type: typ, Resource: "pods", Namespace: "default", Name: name,
				RV: strconv.FormatUint(rv, 10), Object: data, T: secs(t)})
			rv++
			t += 0.0001
		}
		led := func(action history.LedgerAction, scaled float64, code int) {
			h.Ledger = append(h.Ledger, history.LedgerEntry{Node: node, Namespace: "default", Pod: name, UID: uid, Container: "app",
				Action: action, ExitCode: code, Scaled: scaledBase.Add(time.Duration(secs(scaled))), T: secs(t)})
			t += 0.0001
		}
		add(added, obj(name, uid, "", poPending, "", false, ""))
		add(modified, obj(name, uid, node, poPending, "", false, ""))
		led(start, 1, 0)
		led(exit, 2, 1)
		led(start, 12, 0)
		add(modified, obj(name, uid, node, poRunning, "", true, running))
		add(modified, obj(name, uid, node, poRunning, del, true, running))
		led(term, 20, 0)
		led(kill, 50, 0)
		led(exit, 50, 137)
		add(modified, obj(name, uid, node, poFailed, del, false, killed))
		add(removed, obj(name, uid, node, poFailed, del, false, killed))
	}
	h.End = secs(float64(pods) * 0.001)
	return h
}

func TestPhasesSynthetic(t *testing.T) {
	h := poSynthetic(100)
	mustVerdict(t, CheckPhases(bg, h, Options{}), Ok)
	mustVerdict(t, CheckBackoff(bg, h, Options{}), Ok)
}

var poBench struct {
	once sync.Once
	h    *history.History
}

// BenchmarkPhases checks a history of 1,000,000 store changes and ledger
// entries (83,334 pods of 6 + 6).
func BenchmarkPhases(b *testing.B) { poBenchCheck(b, CheckPhases) }

// BenchmarkBackoff checks the restarts of the same history.
func BenchmarkBackoff(b *testing.B) { poBenchCheck(b, CheckBackoff) }

// poBenchCheck runs check over the history of BenchmarkPhases, which must
// find it Ok, and reports the events it reads per second.
func poBenchCheck(b *testing.B, check func(context.Context, *history.History, Options) Result) {
	poBench.once.Do(func() { poBench.h = poSynthetic(83334) })
	h := poBench.h
	n := len(h.Store) + len(h.Ledger)
	b.ResetTimer()
	for b.Loop() {
		if res := check(bg, h, Options{Timeout: time.Hour}); res.Verdict != Ok {
			b.Fatalf("%s: %s", res.Verdict, res.Summary)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPoDecode compares the pod scanner with encoding/json on a
// stored pod object (a lifecycle pod, and a pod of the 1M-event run),
// reporting CPU time per decode besides wall time: on a shared machine it
// depends less on the neighbours.
func BenchmarkPoDecode(b *testing.B) {
	for _, obj := range []struct{ name, data string }{
		{"lifecycle", poSample},
		{"run", podJSON{name: "db3-1", uid: "00000001-0000-4000-8000-000000000001", owner: "db3", node: "node-7", phase: poRunning,
			pet: true, ord: 1, grace: 12, scheduled: true, initialized: true, ready: true, deleting: true}.render()},
	} {
		data := []byte(obj.data)
		for _, dec := range []struct {
			name   string
			decode func() func([]byte, *poPod) error
		}{
			{"scanner", func() func([]byte, *poPod) error { return poDecode }},
			{"scanner-reused", func() func([]byte, *poPod) error { return newPoScanner().decode }},
			{"encoding-json", func() func([]byte, *poPod) error {
				return func(data []byte, p *poPod) error { return json.Unmarshal(data, p) }
			}},
		} {
			b.Run(obj.name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				decode := dec.decode()
				cpu0 := cpuTime()
				for b.Loop() {
					var p poPod
					if err := decode(data, &p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// A cancelled check answers Unknown.
func TestPhasesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	h := poSynthetic(2000)
	res := mustVerdict(t, CheckPhases(ctx, h, Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "cancelled")
	res = mustVerdict(t, CheckBackoff(ctx, h, Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "cancelled")
}
