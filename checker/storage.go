package checker

import (
	"context"
	"fmt"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// StorageChecker names the storage exclusivity checker in results.
const StorageChecker = "storage-exclusivity"

// storageGuarantees are the guarantees the storage checker judges: PS-15
// (an RWO volume is used from one place at a time) and PS-14 (a node fenced
// at the storage stays fenced; it does not come back by itself).
var storageGuarantees = []string{"PS-15", "PS-14"}

// CheckStorage judges the storage server's own record of the writes it
// received (ledger write and write-refused entries, recorded in the order
// the server applied them):
//
//   - PS-15: per volume, the accepted writes of different pod UIDs never
//     interleave. Once UID B's write was accepted after UID A's, no write of
//     A is accepted again while a container of A still runs: A's turn on
//     the volume is over. A write of A that arrives after every container
//     of A stopped was sent before and delayed by the network (a storage
//     partition holds it): PS-15 orders executions and cannot prevent that,
//     so it is reported as expected evidence, not judged.
//
//   - PS-14: once the server refused a write from node N (N was fenced at the
//     storage), it accepts no later write from N. The history records no
//     unfence, so such a write is reported even though an admin may have
//     unfenced N on purpose; the description says so and names any admin
//     write to node N after the refusal (unfencing updates the node too).
//
//   - A storage comparing fencing tokens (the storageFencingTokens policy,
//     recorded in the history's log as LogStorageFencingTokens, or any
//     write-stale entry, which only such a storage writes) refuses a write
//     whose attachment token is below the highest it accepted for the
//     volume. Per volume, an accepted write with such a token is one it
//     would refuse: on a storage that compares, accepting it breaks PS-15
//     (a superseded attachment wrote after its successor); on one that
//     does not, they are counted (they are the interleavings and late
//     writes above). Equal tokens are the same attachment (a pod replaced
//     on the node its volume stays attached to): not stale.
//
// It is pure, O(n) in the ledger (plus O(n) in the API history for the
// descriptions), and answers Unknown when ctx ends or opts.Timeout passes
// first.
func CheckStorage(ctx context.Context, h *history.History, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, StorageChecker, storageGuarantees)
	defer cancel()
	ledger := h.Ledger
	type volume struct {
		cur        string         // the writer whose turn it is
		curLast    int            // its last accepted write
		done       map[string]int // writers whose turn is over -> their last write
		endedBy    map[string]int // … -> the first write of the writer after them
		violations int
	}
	vols := map[string]*volume{}
	compares := storageComparesTokens(h)
	highest := map[string]int{} // volume -> its accepted write with the highest token
	var stale []Evidence        // accepted writes below the volume's highest token
	nStale, nStaleRefused := 0, 0
	refused := map[string]int{}  // node -> its first refused write
	back := map[string]bool{}    // nodes already reported
	running := map[string]int{}  // UID -> containers running, from the runtime's entries
	started := map[string]bool{} // UIDs the runtime's entries show started
	var interleaved, fenceBroken, late []Evidence
	nInterleaved, nFenceBroken, nLate := 0, 0, 0
	st := &stopper{ctx: ctx}
	for i := range ledger {
		e := &ledger[i]
		if st.stopped() {
			return res.cancelled(count(res.Stats.Ops, "storage write"))
		}
		switch e.Action {
		case history.LedgerStart:
			running[uidKey(e)]++
			started[uidKey(e)] = true
			continue
		case history.LedgerExit, history.LedgerPowerOff:
			if running[uidKey(e)] > 0 {
				running[uidKey(e)]--
			}
			continue
		case history.LedgerWriteRefused:
			res.Stats.Ops++
			if _, ok := refused[e.Node]; !ok {
				refused[e.Node] = i
			}
			continue
		case history.LedgerWriteStale:
			res.Stats.Ops++
			nStaleRefused++
			compares = true
			continue
		case history.LedgerWrite:
			res.Stats.Ops++
		default:
			continue
		}
		res.Stats.Checked++
		if j, ok := refused[e.Node]; ok && !back[e.Node] {
			back[e.Node] = true
			nFenceBroken++
			if len(fenceBroken) < opts.maxEvidence() {
				fenceBroken = append(fenceBroken, fenceBrokenEvidence(h, j, i))
			}
		}
		isStale := false
		if j, ok := highest[e.Volume]; !ok || e.Token > ledger[j].Token {
			highest[e.Volume] = i
		} else if e.Token < ledger[j].Token {
			isStale = true
			nStale++
			if len(stale) < opts.maxEvidence() {
				stale = append(stale, staleEvidence(ledger, j, i))
			}
		}
		v := vols[e.Volume]
		if v == nil {
			v = &volume{cur: uidKey(e), curLast: i, done: map[string]int{}, endedBy: map[string]int{}}
			vols[e.Volume] = v
			continue
		}
		w := uidKey(e)
		if w == v.cur {
			v.curLast = i
			continue
		}
		if last, ok := v.done[w]; ok && running[w] == 0 && started[w] {
			// (Without a start of w the ledger records only the storage's
			// side: the writer's liveness is unknown and its write is judged.)
			// The writer's containers had all stopped: the network
			// delivered a write sent before that, late. Kubernetes'
			// ordering of executions cannot prevent it; only a storage
			// that compares fencing tokens could. Reported, not judged.
			if isStale && compares {
				// A storage that compares should have refused it:
				// judged as stale below, not expected.
				continue
			}
			nLate++
			if len(late) < opts.maxEvidence() {
				ev := interleaveEvidence(ledger, e.Volume, last, v.endedBy[w], i)
				ev.Expected = true
				ev.Description = "expected: the write of a stopped container arrived late — " + ev.Description +
					fmt.Sprintf(" (every container of UID %s had stopped before; a storage comparing fencing tokens would refuse token %d)", w, e.Token)
				late = append(late, ev)
			}
			continue
		}
		if last, ok := v.done[w]; ok {
			if v.violations == 0 {
				nInterleaved++
				if len(interleaved) < opts.maxEvidence() {
					interleaved = append(interleaved, interleaveEvidence(ledger, e.Volume, last, v.endedBy[w], i))
				}
			}
			v.violations++
		}
		v.done[v.cur], v.endedBy[v.cur] = v.curLast, i
		delete(v.done, w)
		v.cur, v.curLast = w, i
	}
	res.Stats.Keys = len(vols)
	staleBroken := compares && nStale > 0
	if staleBroken {
		res.Evidence = append(res.Evidence, stale...)
	}
	res.Evidence = append(append(append(res.Evidence, interleaved...), fenceBroken...), late...)
	if res.Stats.Ops == 0 {
		return res.finish(Unknown, "not checked: the ledger records no storage write")
	}

	lateNote := ""
	if nLate > 0 {
		lateNote = fmt.Sprintf("; %s of stopped containers arrived late, after another pod's (delayed by the network; not a violation of PS-15, which orders executions)",
			count(nLate, "write"))
	}
	tokenNote := ""
	switch {
	case compares:
		tokenNote = fmt.Sprintf("; the storage compares fencing tokens and refused %s", count(nStaleRefused, "stale write"))
	case nStale > 0:
		tokenNote = fmt.Sprintf("; %s carried a token below one the storage had accepted for the volume (a storage comparing fencing tokens would refuse them; this one does not compare)",
			count(nStale, "accepted write"))
	}
	if nInterleaved == 0 && nFenceBroken == 0 && !staleBroken {
		return res.finish(Ok, fmt.Sprintf("%s over %s never interleaved two running pods, and no node wrote again once the storage refused it as fenced (%s)%s%s",
			count(res.Stats.Checked, "accepted write"), count(len(vols), "volume"), count(len(refused), "fenced node"), lateNote, tokenNote))
	}
	var parts []string
	if staleBroken {
		parts = append(parts, fmt.Sprintf("the storage compares fencing tokens, yet accepted %s whose token was below one it had accepted for the volume (PS-15: a superseded attachment wrote after its successor), first volume %s",
			count(nStale, "write"), stale[0].Key))
	}
	if nInterleaved > 0 {
		parts = append(parts, fmt.Sprintf("%s interleaved the writes of two pods (PS-15), first volume %s", count(nInterleaved, "volume"), interleaved[0].Key))
	}
	if nFenceBroken > 0 {
		parts = append(parts, fmt.Sprintf("%s wrote again after the storage had refused it as fenced (PS-14, unless an admin unfenced it, which the history does not record), first node %s",
			count(nFenceBroken, "node"), fenceBroken[0].Key))
	}
	return res.finish(Illegal, strings.Join(parts, "; ")+lateNote+tokenNote)
}

// LogStorageFencingTokens is the attribute of a history log line (the run's
// policies) saying the storage compares fencing tokens ("true").
const LogStorageFencingTokens = "storageFencingTokens"

// storageComparesTokens reports whether the history says its storage
// compares fencing tokens.
func storageComparesTokens(h *history.History) bool {
	for _, l := range h.Logs {
		if l.Attrs[LogStorageFencingTokens] == "true" {
			return true
		}
	}
	return false
}

// staleEvidence shows the write that set the volume's highest token and a
// later accepted write with a lower one.
func staleEvidence(ledger []history.LedgerEntry, top, staleAt int) Evidence {
	t, s := ledger[top], ledger[staleAt]
	return Evidence{
		Key: s.Volume,
		Description: fmt.Sprintf("volume %s: the storage accepted a write of pod %s (UID %s, node %s) with token %d at %s, then one of pod %s (UID %s, node %s) with the lower token %d at %s, which a storage comparing fencing tokens refuses",
			s.Volume, entryPod(&t), uidKey(&t), t.Node, t.Token, at(ledger, top), entryPod(&s), uidKey(&s), s.Node, s.Token, at(ledger, staleAt)),
		Ledger: ledgerEntries(ledger, top, staleAt),
	}
}

// interleaveEvidence shows writer A's write, the write of another pod that
// took the volume over, and A's write accepted after it.
func interleaveEvidence(ledger []history.LedgerEntry, volume string, aLast, takeover, aAgain int) Evidence {
	a, b, again := ledger[aLast], ledger[takeover], ledger[aAgain]
	return Evidence{
		Key: volume,
		Description: fmt.Sprintf("volume %s: pod %s (UID %s, node %s, token %d) wrote at %s, then pod %s (UID %s, node %s, token %d) took the volume over at %s, and the storage still accepted a write of UID %s (node %s, token %d) at %s: two pods used the RWO volume at once",
			volume, entryPod(&a), uidKey(&a), a.Node, a.Token, at(ledger, aLast), entryPod(&b), uidKey(&b), b.Node, b.Token, at(ledger, takeover),
			uidKey(&again), again.Node, again.Token, at(ledger, aAgain)),
		Ledger: ledgerEntries(ledger, aLast, takeover, aAgain),
	}
}

// fenceBrokenEvidence shows a node's refused write and a later accepted
// one, with the admin writes to that node in between that might be an
// unfence.
func fenceBrokenEvidence(h *history.History, refusedAt, acceptedAt int) Evidence {
	ledger := h.Ledger
	r, a := ledger[refusedAt], ledger[acceptedAt]
	ev := Evidence{
		Key:    a.Node,
		Ledger: ledgerEntries(ledger, refusedAt, acceptedAt),
	}
	var calls []int
	for i, c := range h.API {
		if c.Identity == identityAdmin && c.Resource == "nodes" && c.Name == a.Node && c.Verb != "get" && c.Verb != "list" && c.Verb != "watch" &&
			mayHaveHappened(&c) && c.Return >= r.T && c.Invoke <= a.T && len(calls) < 8 {
			calls = append(calls, i)
		}
	}
	ev.API = apiCalls(h.API, calls...)
	unfence := "the history records no unfence, and no admin write to the node between them"
	if len(calls) > 0 {
		unfence = fmt.Sprintf("the history records no unfence; %s to the node between them may have been one", count(len(calls), "admin write"))
	}
	ev.Description = fmt.Sprintf("the storage refused a write of pod %s from node %s to volume %s at %s, node %s being fenced, but accepted a write of pod %s (UID %s) from it to volume %s at %s; %s",
		entryPod(&r), r.Node, r.Volume, at(ledger, refusedAt), r.Node, entryPod(&a), uidKey(&a), a.Volume, at(ledger, acceptedAt), unfence)
	return ev
}
