package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// AuthorityChecker names the force-deletion authority checker in results.
const AuthorityChecker = "authority"

// authorityGuarantees are the guarantees the authority checker judges: who
// may force delete a pod (PS-8, PS-9, PS-10, PS-14), that a kubelet
// deletes only its own node's pods (PS-1, the node restriction), and on the
// embedded target that the API server removes a pod only after a grace-0
// deletion and never refuses a graceful one (LC-11, PS-3).
var authorityGuarantees = []string{"PS-1", "PS-8", "PS-9", "PS-10", "PS-14", "LC-11", "PS-3"}

// forceGuarantees are the authority checker's guarantees about force
// deletion: those an illegal force deletion violates.
var forceGuarantees = []string{"PS-8", "PS-9", "PS-10", "PS-14"}

// CheckAuthority judges every successful force deletion of a pod in the API
// history: a delete (or eviction) that asked for grace 0 and succeeded. It is
// allowed to
//
//   - admin;
//   - the pod's own kubelet, finishing the deletion once its containers are
//     terminated (PS-8);
//   - pod GC, once an admin deleted the pod's node and nothing registered it
//     again (PS-10);
//   - the fencing controller, once the fencing controller (or an admin, who
//     may fence by hand) wrote the node's status (PS-14).
//
// The checker approximates the API's view of the pod in the direction that
// never reports an allowed deletion. A grace-0 deletion is judged when the
// ledger shows a container of the pod running throughout the call (the
// pod's node is where that container ran), or, for identities other than
// kubelets, when the store recorded the pod deleted (the object as the call
// removed it) bound to a node and not terminal, whether or not its kubelet
// had started it: PS-9 and PS-14 forbid the force deletion itself. Any
// other grace-0 deletion (of an unbound, terminal or finished pod, for
// which grace 0 is no force deletion, GP-6) is not judged. A node status
// write by the fencing controller counts as the fence confirmation (its
// content is not recorded), and a later unfence is not seen; a deletion or
// write of unknown outcome counts as done. Any other identity's force
// deletion of a running (or bound, not terminal) pod is Illegal, and so is
// a kubelet's of a pod of another node or of its own pod still running
// (PS-8). When the history has neither a ledger nor the store's record of
// the deletion, force deletions by other identities cannot be judged and
// the verdict is Unknown.
//
// Every pod deletion or eviction by a kubelet that may have happened,
// whatever its grace, is judged against the node restriction (PS-1): the
// pod must be bound to the kubelet's own node, as the store recorded it (by
// the UID the answer named, else the last version of its name before the
// call). A deletion whose pod the store does not show bound is not judged;
// PS-1 is listed only when one was.
//
// On the embedded target, whose components' calls the history holds
// whole, every removal of a pod from the store is judged too (see
// gracefulRemovals): a bound, unterminated pod leaves the store only after a
// deletion asking for grace 0 may have happened, or the API server removed
// a pod its kubelet had not finished (PS-8, LC-11). So is every graceful
// deletion by admin, the workload, the scheduler or a controller (see
// refusedGraceful): the API server must not refuse it (LC-11, PS-3). LC-11
// and PS-3 are listed only when these rules judged something. And the
// garbage collector deletes no dependent of an owner deleted with
// propagationPolicy Orphan (see orphanDeletions; PS-9).
//
// PS-14 is the fencing controller's rule: the result lists it only when the
// history holds a call of the fencing controller. A run without one (no
// fencing controller ran: it was not enabled, or the target has none, as
// the kube target) gives PS-14 nothing to judge, and an Ok would pass it
// vacuously; a force deletion by the fencing controller is a call of it, so
// no violation goes unjudged.
//
// It is pure, bounded by O(n log n + deletions × runs of their pod) in the
// API history, ledger and store events, and answers Unknown when ctx ends
// or opts.Timeout passes first.
func CheckAuthority(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, AuthorityChecker)
}

func checkAuthority(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, AuthorityChecker, authorityGuarantees)
	defer cancel()
	h := v.h
	noFencing := !slices.ContainsFunc(h.API, func(c history.APICall) bool { return c.Identity == identityFencing })
	if noFencing {
		res.Guarantees = slices.DeleteFunc(slices.Clone(res.Guarantees), func(id string) bool { return id == "PS-14" })
	}
	var forced []int
	deletions, unknownForced, forcedCollections := 0, 0, 0
	for i := range h.API {
		c := &h.API[i]
		switch {
		case isPodCollectionDeletion(c):
			deletions++
			if isForce(c) && mayHaveHappened(c) {
				forcedCollections++
			}
		case isPodDeletion(c):
			deletions++
			switch {
			case !isForce(c):
			case c.Outcome == history.StatusOK:
				forced = append(forced, i)
			case c.Outcome == history.StatusUnknown:
				unknownForced++
			}
		}
	}
	if deletions == 0 {
		return res.finish(Unknown, "not checked: the API history records no deletion of pods")
	}
	res.Stats.Ops = deletions
	res.Stats.Checked = len(forced)
	st := &stopper{ctx: ctx}
	pi, ok := v.pods(ctx)
	if !ok {
		return res.cancelled(count(deletions, "deletion"))
	}
	runs, ok := v.runs(ctx)
	if !ok {
		return res.cancelled(count(deletions, "deletion"))
	}
	crossEv, crossIllegal, crossJudged := crossNodeDeletions(h, pi, opts.maxEvidence())
	res.Stats.Checked += crossJudged
	if crossJudged == 0 {
		res.Guarantees = slices.DeleteFunc(slices.Clone(res.Guarantees), func(id string) bool { return id == "PS-1" })
	}

	w := newWitness(h, runs, pi)
	var ev, undecidedEv []Evidence
	byWhom := map[string]int{}
	illegal, idle, finished, undecided := 0, 0, 0, 0
	// forbid counts the force deletion h.API[i] as illegal for why, and
	// keeps it as evidence while there is room: what its pod was then
	// (state) and the ledger entries that show it.
	forbid := func(i int, why, state string, ledger []history.LedgerEntry) {
		illegal++
		res.Stats.Keys++
		if len(ev) < opts.maxEvidence() {
			c := h.API[i]
			ev = append(ev, Evidence{
				Key:         podRef(c.Namespace, c.Name),
				Description: fmt.Sprintf("%s force deleted pod %s (%s)%s: %s", c.Identity, podRef(c.Namespace, c.Name), callRef(&c), state, why),
				Ledger:      ledger,
				API:         apiCalls(h.API, i),
			})
		}
	}
	for _, i := range forced {
		if st.stopped() {
			return res.cancelled(count(len(forced), "force deletion"))
		}
		c := h.API[i]
		if c.Identity == identityAdmin {
			byWhom["admin"]++
			continue
		}
		r, running := w.runningThrough(c)
		_, kubelet := kubeletNode(c.Identity)
		if !running && !kubelet {
			if d, ok := w.deletedBound(c); ok {
				why, license := w.judge(c, d.node)
				if why == "" {
					byWhom[license]++
					continue
				}
				forbid(i, why, fmt.Sprintf(", which the store recorded deleted (rv %s, t=%s) bound to node %s in phase %s",
					d.rv, time.Duration(d.t), d.node, d.phase), nil)
				continue
			}
		}
		if !running {
			switch {
			case kubelet:
				finished++
			case len(runs) == 0:
				undecided++
				if len(undecidedEv) < opts.maxEvidence() {
					undecidedEv = append(undecidedEv, Evidence{Key: podRef(c.Namespace, c.Name), API: apiCalls(h.API, i),
						Description: fmt.Sprintf("%s: with no ledger the history cannot show whether the pod was running", callRef(&c))})
				}
			default:
				idle++
			}
			continue
		}
		why, license := w.judge(c, r.node)
		if why == "" {
			byWhom[license]++
			continue
		}
		forbid(i, why, fmt.Sprintf(" while its container %q (UID %s) ran on node %s since %s",
			r.container, r.uid, r.node, at(h.Ledger, r.start)), ledgerEntries(h.Ledger, r.start, r.end))
	}

	remEv, remIllegal, remJudged, remWhy := gracefulRemovals(h, opts.maxEvidence())
	res.Stats.Checked += remJudged
	refEv, refIllegal, refJudged, refWhy := refusedGraceful(h, opts.maxEvidence())
	res.Stats.Checked += refJudged
	orphEv, orphIllegal, orphJudged, orphWhy := orphanDeletions(h, opts.maxEvidence())
	res.Stats.Checked += orphJudged
	if refJudged == 0 {
		res.Guarantees = slices.DeleteFunc(slices.Clone(res.Guarantees), func(id string) bool { return id == "PS-3" })
	}
	if refJudged == 0 && remJudged == 0 {
		res.Guarantees = slices.DeleteFunc(slices.Clone(res.Guarantees), func(id string) bool { return id == "LC-11" })
	}

	var notes []string
	switch {
	case remWhy != "":
		notes = append(notes, "removals without a grace-0 deletion not judged: "+remWhy)
	case remJudged > 0 && remIllegal == 0:
		notes = append(notes, fmt.Sprintf("each of %s was after a deletion asking for grace 0", count(remJudged, "removal of a bound pod")))
	}
	switch {
	case refWhy != "":
		notes = append(notes, "refusals of graceful deletions not judged: "+refWhy)
	case refJudged > 0 && refIllegal == 0:
		notes = append(notes, fmt.Sprintf("none of %s was refused", count(refJudged, "graceful deletion")))
	}
	if orphWhy == "" && orphJudged > 0 && orphIllegal == 0 {
		notes = append(notes, fmt.Sprintf("the garbage collector deleted none of %s of owners deleted with propagationPolicy Orphan", count(orphJudged, "dependent")))
	}
	if idle > 0 {
		notes = append(notes, fmt.Sprintf("%s by controllers or users of pods with no container running throughout (unbound, terminal or finished: no force deletion in effect) not judged", count(idle, "grace-0 deletion")))
	}
	if unknownForced > 0 {
		notes = append(notes, fmt.Sprintf("%s of unknown outcome not judged", count(unknownForced, "grace-0 deletion")))
	}
	if forcedCollections > 0 {
		notes = append(notes, fmt.Sprintf("%s with grace 0 not judged (which pods it deleted is not recorded)", count(forcedCollections, "deletecollection")))
	}
	if noFencing {
		notes = append(notes, "PS-14 not judged: no fencing controller call in the history")
	}
	if crossJudged > 0 && crossIllegal == 0 {
		notes = append(notes, fmt.Sprintf("each of %s by kubelets was of a pod bound to its own node", count(crossJudged, "judged deletion")))
	}
	suffix := ""
	if len(notes) > 0 {
		suffix = "; " + strings.Join(notes, "; ")
	}
	switch {
	case illegal > 0 || crossIllegal > 0 || remIllegal > 0 || refIllegal > 0 || orphIllegal > 0:
		// Only the guarantees a violation breaks are named.
		var parts []string
		res.Guarantees = nil
		if crossIllegal > 0 {
			res.Guarantees = append(res.Guarantees, "PS-1")
			res.Evidence = append(res.Evidence, crossEv...)
			parts = append(parts, fmt.Sprintf("%s by kubelets were of pods bound to another node, first %s", count(crossIllegal, "deletion"), crossEv[0].Description))
		}
		if illegal > 0 {
			res.Guarantees = append(res.Guarantees, slices.DeleteFunc(slices.Clone(forceGuarantees), func(id string) bool { return noFencing && id == "PS-14" })...)
			res.Evidence = append(res.Evidence, ev...)
			parts = append(parts, fmt.Sprintf("%s of running or bound, unterminated pods came from identities without the authority, first %s",
				count(illegal, "force deletion"), ev[0].Description))
		}
		if remIllegal > 0 {
			for _, id := range removalGuarantees {
				if !slices.Contains(res.Guarantees, id) {
					res.Guarantees = append(res.Guarantees, id)
				}
			}
			res.Evidence = append(res.Evidence, remEv...)
			parts = append(parts, fmt.Sprintf("%s of bound, unterminated pods came with no deletion asking for grace 0, first %s",
				count(remIllegal, "removal"), remEv[0].Description))
		}
		if refIllegal > 0 {
			for _, id := range refusalGuarantees {
				if !slices.Contains(res.Guarantees, id) {
					res.Guarantees = append(res.Guarantees, id)
				}
			}
			res.Evidence = append(res.Evidence, refEv...)
			parts = append(parts, fmt.Sprintf("%s refused, first %s", count(refIllegal, "graceful deletion"), refEv[0].Description))
		}
		if orphIllegal > 0 {
			if !slices.Contains(res.Guarantees, "PS-9") {
				res.Guarantees = append(res.Guarantees, "PS-9")
			}
			res.Evidence = append(res.Evidence, orphEv...)
			parts = append(parts, fmt.Sprintf("%s by the garbage collector of dependents it should have orphaned, first %s", count(orphIllegal, "deletion"), orphEv[0].Description))
		}
		return res.finish(Illegal, strings.Join(parts, "; ")+suffix)
	case undecided > 0:
		res.Evidence = undecidedEv
		return res.finish(Unknown, fmt.Sprintf("%s by controllers or users cannot be judged: the history has no ledger to show whether their pods were running%s",
			count(undecided, "force deletion"), suffix))
	}
	if len(forced) == 0 {
		return res.finish(Ok, fmt.Sprintf("%s of pods, none asking for grace 0%s", count(deletions, "deletion"), suffix))
	}
	var allowed []string
	if finished > 0 {
		allowed = append(allowed, fmt.Sprintf("%d by kubelets finishing their pods' deletion", finished))
	}
	for _, who := range []struct{ key, what string }{
		{"admin", "admin"}, {"podgc", "pod GC after the node's deletion"}, {"fencing", "the fencing controller after a fence"},
	} {
		if n := byWhom[who.key]; n > 0 {
			allowed = append(allowed, fmt.Sprintf("%d by %s", n, who.what))
		}
	}
	if len(allowed) == 0 {
		allowed = append(allowed, "none of a running pod")
	}
	return res.finish(Ok, fmt.Sprintf("%s of pods, %d asking for grace 0: %s%s",
		count(deletions, "deletion"), len(forced), strings.Join(allowed, ", "), suffix))
}

// isForce reports a deletion that asked for grace 0.
func isForce(c *history.APICall) bool {
	return c.GracePeriodSeconds != nil && *c.GracePeriodSeconds == 0
}

// witness answers what the ledger and the API history show around one
// force deletion.
type witness struct {
	h      *history.History
	pods   *podIndex
	runs   []run
	byUID  map[string][]int // uid -> runs
	byPod  map[string][]string
	nodeOp map[string][]int // node -> admin deletions, creates and fence writes of it
	// deleted maps a pod UID to the store's DELETED event of it, parsed
	// on first use.
	deleted map[string]deletedPod
}

// deletedPod is a pod as the store recorded it deleted.
type deletedPod struct {
	node, phase, rv string
	t               int64
}

// deletedBound returns the store's record of the deletion of the pod c
// removed (by the UID c's answer named) when the pod was then bound to a
// node and not terminal: grace 0 removed it at once, with no grace for
// whatever its kubelet ran or was about to run.
func (w *witness) deletedBound(c history.APICall) (deletedPod, bool) {
	if c.UID == "" {
		return deletedPod{}, false
	}
	if w.deleted == nil {
		w.deleted = map[string]deletedPod{}
		for _, vr := range w.pods.versions {
			ev := &w.h.Store[vr.store]
			if ev.Type != history.StoreDeleted || len(ev.Object) == 0 {
				continue
			}
			if p := vr.pod; p != nil {
				if p.Metadata.UID != "" {
					w.deleted[p.Metadata.UID] = deletedPod{node: p.Spec.NodeName, phase: p.Status.Phase, rv: ev.RV, t: ev.T}
				}
				continue
			}
			// An object the pod scanner (and encoding/json) cannot read as a
			// whole may still give these fields.
			var p removedPod
			if json.Unmarshal(ev.Object, &p) != nil || p.Metadata.UID == "" {
				continue
			}
			w.deleted[p.Metadata.UID] = deletedPod{node: p.Spec.NodeName, phase: p.Status.Phase, rv: ev.RV, t: ev.T}
		}
	}
	d, ok := w.deleted[c.UID]
	if !ok || d.node == "" || d.phase == "Succeeded" || d.phase == "Failed" {
		return deletedPod{}, false
	}
	if d.phase == "" {
		d.phase = "Pending"
	}
	return d, true
}

func newWitness(h *history.History, runs []run, pods *podIndex) *witness {
	w := &witness{h: h, pods: pods, runs: runs, byUID: map[string][]int{}, byPod: map[string][]string{}, nodeOp: map[string][]int{}}
	for i, r := range runs {
		if len(w.byUID[r.uid]) == 0 {
			w.byPod[r.pod] = append(w.byPod[r.pod], r.uid)
		}
		w.byUID[r.uid] = append(w.byUID[r.uid], i)
	}
	for i := range h.API {
		c := &h.API[i]
		if c.Group == "" && c.Resource == "nodes" && c.Name != "" && (c.Verb == "delete" || c.Verb == "create" || c.Verb == "update" || c.Verb == "patch") {
			w.nodeOp[c.Name] = append(w.nodeOp[c.Name], i)
		}
	}
	return w
}

// runningThrough returns a container run of the pod c deleted that spans
// the whole call: it started before the call was invoked and had not ended
// when it returned. The pod is the UID c's answer named, or, without one,
// any pod of that name (the latest-started run wins).
func (w *witness) runningThrough(c history.APICall) (run, bool) {
	ledger := w.h.Ledger
	uids := []string{c.UID}
	if c.UID == "" {
		uids = w.byPod[podRef(c.Namespace, c.Name)]
	}
	var best run
	found := false
	for _, uid := range uids {
		for _, i := range w.byUID[uid] {
			r := w.runs[i]
			if r.pod != podRef(c.Namespace, c.Name) || ledger[r.start].T >= c.Invoke || r.endT(ledger) <= c.Return {
				continue
			}
			if !found || r.start > best.start {
				best, found = r, true
			}
		}
	}
	return best, found
}

// judge says why c, a force deletion of a pod of node (still running
// there, or bound there and not terminal), was not allowed, or returns ""
// and the license it had.
func (w *witness) judge(c history.APICall, node string) (why, license string) {
	if kn, ok := kubeletNode(c.Identity); ok {
		if kn == node {
			return "PS-8: a kubelet finishes a deletion only once all the pod's containers are confirmed terminated, and this one still ran", ""
		}
		return fmt.Sprintf("PS-8: only kubelet:%s finishes the deletion of the pods of node %s", node, node), ""
	}
	switch c.Identity {
	case identityPodGC:
		if w.nodeDeleted(node, c) {
			return "", "podgc"
		}
		return fmt.Sprintf("PS-10: pod GC force deletes only pods whose node object is gone, and the history shows no admin deletion of node %s before (or it registered again)", node), ""
	case identityFencing:
		if w.nodeFenced(node, c) {
			return "", "fencing"
		}
		return fmt.Sprintf("PS-14: the fencing controller force deletes only after the node's fence is confirmed, and the history shows no status write of node %s by the fencing controller before", node), ""
	}
	return "PS-9: controllers and users only delete gracefully; force deletion is reserved to admin, the pod's kubelet, pod GC for deleted nodes and the fencing controller for fenced ones", ""
}

// nodeDeleted reports an admin deletion of node that may have taken effect
// before c did, with no successful registration of the node between them.
func (w *witness) nodeDeleted(node string, c history.APICall) bool {
	api := w.h.API
	deleted := false
	var deletedReturn int64
	for _, i := range w.nodeOp[node] {
		n := api[i]
		switch {
		case n.Verb == "delete" && n.Identity == identityAdmin && mayHaveHappened(&n) && n.Invoke < c.Return:
			deleted, deletedReturn = true, max(deletedReturn, n.Return)
		case n.Verb == "create" && n.Outcome == history.StatusOK && deleted && n.Invoke > deletedReturn && n.Return < c.Invoke:
			deleted = false
		}
	}
	return deleted
}

// nodeFenced reports a status write of node by the fencing controller or
// admin that may have taken effect before c did.
func (w *witness) nodeFenced(node string, c history.APICall) bool {
	for _, i := range w.nodeOp[node] {
		n := w.h.API[i]
		if n.Subresource == "status" && (n.Verb == "update" || n.Verb == "patch") &&
			(n.Identity == identityFencing || n.Identity == identityAdmin) && mayHaveHappened(&n) && n.Invoke < c.Return {
			return true
		}
	}
	return false
}
