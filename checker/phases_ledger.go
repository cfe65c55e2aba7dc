package checker

// The phase checker's judgement of the container starts in the ledger: init
// containers in order before any app container (LC-10), and no start after
// the pod reached a terminal phase (LC-2).

import (
	"fmt"

	"github.com/podsafe/podsafe/history"
)

// poCheckLedger applies LC-10 and LC-2's "no start after a terminal phase"
// to the ledger's container starts of the pods whose spec the store
// recorded. It returns the violations and the number of starts judged.
func poCheckLedger(ledger []history.LedgerEntry, pods []*poPodHistory, st *stopper) ([]poViolation, int, bool) {
	type podState struct {
		spec     *poPod
		key      string
		index    map[string]int // container name -> position: init containers first
		nInit    int
		sidecar  []bool
		running  []int // ledger index of the running instance's start, or -1
		exitCode []int
		exitAt   []int // ledger index of the newest exit, or -1
		started  []int // ledger index of the first start, or -1
		terminal int64 // recorder time of the first terminal phase set by the kubelet, or -1
		termEv   poEvent
		reported bool
		termRep  bool
	}
	states := make(map[string]*podState, len(pods))
	for _, ph := range pods {
		spec := ph.spec()
		ps := &podState{spec: spec, key: spec.ref(), index: map[string]int{}, nInit: len(spec.Spec.InitContainers), terminal: -1}
		for i, c := range spec.Spec.InitContainers {
			ps.index[c.Name] = i
			ps.sidecar = append(ps.sidecar, c.RestartPolicy == poAlways)
		}
		for i, c := range spec.Spec.Containers {
			ps.index[c.Name] = ps.nInit + i
			ps.sidecar = append(ps.sidecar, false)
		}
		n := len(ps.sidecar)
		ps.running, ps.exitCode, ps.exitAt, ps.started = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
		for i := range n {
			ps.running[i], ps.exitAt[i], ps.started[i] = -1, -1, -1
		}
		for _, e := range ph.events {
			if poTerminal(e.pod.Status.Phase) && e.pod.Status.Reason != poReasonNodeLost {
				ps.terminal, ps.termEv = e.t, e
				break
			}
		}
		states[ph.uid] = ps
	}
	var out []poViolation
	starts := 0
	for i := range ledger {
		e := &ledger[i]
		if st.stopped() {
			return nil, 0, true
		}
		switch e.Action {
		case history.LedgerStart, history.LedgerExit, history.LedgerPowerOff:
		default:
			continue // nothing else starts or ends a container
		}
		ps := states[e.UID]
		if ps == nil {
			continue
		}
		k, ok := ps.index[e.Container]
		if !ok {
			continue
		}
		switch e.Action {
		case history.LedgerExit, history.LedgerPowerOff:
			ps.running[k] = -1
			ps.exitAt[k] = i
			ps.exitCode[k] = e.ExitCode
			if e.Action == history.LedgerPowerOff {
				ps.exitCode[k] = 137
			}
			continue
		case history.LedgerStart:
		default:
			continue
		}
		starts++
		if ps.terminal >= 0 && e.T > ps.terminal && !ps.termRep {
			ps.termRep = true
			out = append(out, poViolation{uid: e.UID, key: ps.key, guarantee: "LC-2", t: e.T, ledger: ledgerEntries(ledger, i),
				desc: fmt.Sprintf("container %s started at %s after the store recorded the pod %s at %s: nothing restarts in a terminal pod",
					e.Container, at(ledger, i), ps.termEv.pod.Status.Phase, poEventRef(ps.termEv))})
		}
		if !ps.reported {
			if why, idx := poInitOrder(ps.spec, k, ps.nInit, ps.sidecar, ps.running, ps.exitAt, ps.exitCode, ps.started, ledger); why != "" {
				ps.reported = true
				out = append(out, poViolation{uid: e.UID, key: ps.key, guarantee: "LC-10", t: e.T,
					ledger: ledgerEntries(ledger, append(idx, i)...),
					desc:   fmt.Sprintf("container %s started at %s %s", e.Container, at(ledger, i), why)})
			}
		}
		ps.running[k] = i
		if ps.started[k] < 0 {
			ps.started[k] = i
		}
	}
	return out, starts, false
}

// poInitOrder says how a start of container k (init containers first, nInit
// of them) breaks LC-10 given what runs and what exited, or "", with the
// ledger indices that show it.
func poInitOrder(spec *poPod, k, nInit int, sidecar []bool, running, exitAt, exitCode, started []int, ledger []history.LedgerEntry) (string, []int) {
	name := func(j int) string {
		if j < nInit {
			return "init container " + spec.Spec.InitContainers[j].Name
		}
		return "app container " + spec.Spec.Containers[j-nInit].Name
	}
	before := k // every init container before k, or all of them for an app container
	if k >= nInit {
		before = nInit
	}
	for j := range before {
		switch {
		case sidecar[j]:
			if started[j] < 0 {
				return fmt.Sprintf("before the sidecar %s ever started", name(j)), nil
			}
		case running[j] >= 0:
			return fmt.Sprintf("while %s, started at %s, still ran", name(j), at(ledger, running[j])), []int{running[j]}
		case exitAt[j] < 0:
			return fmt.Sprintf("before %s ever ran", name(j)), nil
		case exitCode[j] != 0:
			return fmt.Sprintf("after %s's last run exited %d at %s, not 0", name(j), exitCode[j], at(ledger, exitAt[j])), []int{exitAt[j]}
		}
	}
	if k < nInit && !sidecar[k] {
		// A regular init container runs alone: no later init container
		// and no app container may run meanwhile.
		for j := k + 1; j < len(running); j++ {
			if running[j] >= 0 && !sidecar[j] {
				return fmt.Sprintf("while %s, started at %s, ran", name(j), at(ledger, running[j])), []int{running[j]}
			}
		}
	}
	return "", nil
}
