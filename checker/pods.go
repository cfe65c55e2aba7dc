package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// What the ledger and the API history say about pods, shared by the
// at-most-one, grace-period, authority and storage checkers. The ledger is
// the oracle of what ran; its order is the order the entries were recorded,
// each as its action happened, so it is the order the checkers trust across
// nodes. Recorder times (the loaded T of ledger entries, Invoke and Return of
// API calls) share one monotonic base and place ledger entries among API
// calls; scaled times judge durations on one node's clock.

// Identities of the components whose calls the checkers judge, as the API
// server names them (apiserver/identity.go; checker does not import the
// system under test).
const (
	identityAdmin        = "admin"
	identityPodGC        = "podgc"
	identityPet          = "pet-controller"
	identityReplicaSet   = "replicaset-controller"
	identityFencing      = "fencing-controller"
	kubeletIdentityStart = "kubelet:"
)

// kubeletNode returns the node of a kubelet identity.
func kubeletNode(identity string) (string, bool) {
	node, ok := strings.CutPrefix(identity, kubeletIdentityStart)
	return node, ok && node != ""
}

// podRef renders a pod identity.
func podRef(namespace, name string) string { return namespace + "/" + name }

// entryPod is the pod identity of a ledger entry.
func entryPod(e *history.LedgerEntry) string { return podRef(e.Namespace, e.Pod) }

// uidKey names a pod instance: its UID, or, for entries without one, its
// identity and node (the best the ledger allows).
func uidKey(e *history.LedgerEntry) string {
	if e.UID != "" {
		return e.UID
	}
	return entryPod(e) + "@" + e.Node
}

// isRuntimeAction reports the actions a node's container runtime records
// about a container it runs (storage writes are recorded by the storage
// server instead).
func isRuntimeAction(a history.LedgerAction) bool {
	switch a {
	case history.LedgerStart, history.LedgerTerm, history.LedgerKill, history.LedgerExit,
		history.LedgerPreStopStart, history.LedgerPreStopEnd, history.LedgerPowerOff:
		return true
	}
	return false
}

// run is one execution of one container: its start entry and the exit or
// power-off that ended it.
type run struct {
	uid       string // uidKey
	pod       string // namespace/name
	node      string
	container string
	start     int // ledger index of the start
	end       int // ledger index of the exit or power-off; endless when it never ended
}

// endless is the end of a run still going when the history ends.
const endless = math.MaxInt

// containerRuns pairs every start in the ledger with the first exit or
// power-off of the same container after it. A container started again
// before it ended (which a runtime should never record) opens a second run;
// ends close the oldest open run first. Runs come in the order of their
// starts.
func containerRuns(ledger []history.LedgerEntry) []run {
	type ctr struct{ uid, container string }
	open := map[ctr][]int{} // index into runs
	var runs []run
	for i := range ledger {
		e := &ledger[i]
		k := ctr{uidKey(e), e.Container}
		switch e.Action {
		case history.LedgerStart:
			open[k] = append(open[k], len(runs))
			runs = append(runs, run{uid: k.uid, pod: entryPod(e), node: e.Node, container: e.Container, start: i, end: endless})
		case history.LedgerExit, history.LedgerPowerOff:
			q := open[k]
			if len(q) == 0 {
				continue // the exit that follows a power-off, or an end without a start
			}
			runs[q[0]].end = i
			if len(q) == 1 {
				delete(open, k)
			} else {
				open[k] = q[1:]
			}
		}
	}
	return runs
}

// endT is the recorder time of a run's end, or +∞ for a run that never
// ended.
func (r run) endT(ledger []history.LedgerEntry) int64 {
	if r.end == endless {
		return math.MaxInt64
	}
	return ledger[r.end].T
}

// ledgerEntries returns the entries at the given indices in ledger order,
// skipping endless and duplicate indices.
func ledgerEntries(ledger []history.LedgerEntry, idx ...int) []history.LedgerEntry {
	sort.Ints(idx)
	var out []history.LedgerEntry
	last := -1
	for _, i := range idx {
		if i == endless || i < 0 || i >= len(ledger) || i == last {
			continue
		}
		out = append(out, ledger[i])
		last = i
	}
	return out
}

// apiCalls returns the calls at the given indices in invoke order, without
// duplicates.
func apiCalls(api []history.APICall, idx ...int) []history.APICall {
	sort.Ints(idx)
	var out []history.APICall
	last := -1
	for _, i := range idx {
		if i < 0 || i >= len(api) || i == last {
			continue
		}
		out = append(out, api[i])
		last = i
	}
	return out
}

// mayHaveHappened reports an API call that took effect or may have: its
// outcome is ok or unknown.
func mayHaveHappened(c *history.APICall) bool {
	return c.Outcome == history.StatusOK || c.Outcome == history.StatusUnknown
}

// isPodDeletion reports a request that deletes one pod by name: DELETE of
// the pod, or a create of its eviction subresource.
func isPodDeletion(c *history.APICall) bool {
	if c.Group != "" || c.Resource != "pods" || c.Name == "" {
		return false
	}
	return (c.Verb == "delete" && c.Subresource == "") || (c.Verb == "create" && c.Subresource == "eviction")
}

// isPodCollectionDeletion reports a deletecollection of pods, which may
// delete any pod of its namespace ("" for every namespace).
func isPodCollectionDeletion(c *history.APICall) bool {
	return c.Group == "" && c.Resource == "pods" && c.Subresource == "" && c.Verb == "deletecollection"
}

// isPodCreate reports a create of a pod (not of a subresource).
func isPodCreate(c *history.APICall) bool {
	return c.Group == "" && c.Resource == "pods" && c.Subresource == "" && c.Verb == "create"
}

// podCreators says who created which pod, from the recorded creates: by UID
// for creates whose answer was read, and by name for every create that may
// have happened (the name comes from the request, so even a create of
// unknown outcome names its pod).
type podCreators struct {
	byUID  map[string]int             // uid -> index of its create call
	byName map[string]map[string]bool // namespace/name -> identities
	// pets is true when the pet controller's creates are recorded.
	pets bool
}

func newPodCreators(api []history.APICall) *podCreators {
	pc := &podCreators{byUID: map[string]int{}, byName: map[string]map[string]bool{}}
	for i := range api {
		c := &api[i]
		if !isPodCreate(c) || !mayHaveHappened(c) {
			continue
		}
		if c.Identity == identityPet {
			pc.pets = true
		}
		if c.UID != "" && c.Outcome == history.StatusOK {
			pc.byUID[c.UID] = i
		}
		if c.Name != "" {
			k := podRef(c.Namespace, c.Name)
			if pc.byName[k] == nil {
				pc.byName[k] = map[string]bool{}
			}
			pc.byName[k][c.Identity] = true
		}
	}
	return pc
}

// ownerKinds reads the controller owner of the pods uids the store
// recorded: uid -> "StatefulSet", "ReplicaSet" or another kind. It is the
// fallback of podCreators when the history holds no create call for a pod
// (an existing cluster whose audit log podsafe cannot read): the store's
// record of a pod says which controller owns it. Only versions that carry
// owner references are decoded, each UID's first.
func ownerKinds(store []history.StoreEvent, uids map[string]bool) map[string]string {
	out := map[string]string{}
	for _, ev := range store {
		if ev.Resource != "pods" || len(ev.Object) == 0 || !bytes.Contains(ev.Object, []byte(`"ownerReferences"`)) {
			continue
		}
		var p struct {
			Metadata struct {
				UID             string `json:"uid"`
				OwnerReferences []struct {
					Kind       string `json:"kind"`
					Controller *bool  `json:"controller"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
		}
		if json.Unmarshal(ev.Object, &p) != nil || !uids[p.Metadata.UID] {
			continue
		}
		if _, seen := out[p.Metadata.UID]; seen {
			continue
		}
		out[p.Metadata.UID] = ""
		for _, o := range p.Metadata.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				out[p.Metadata.UID] = o.Kind
			}
		}
	}
	return out
}

// withOwners classifies a pod the API history says nothing of by its
// controller owner in the store (see ownerKinds); known stays as it is.
func withOwners(known podKind, owner, pod string) podKind {
	if known != kindUnknown || owner == "" {
		return known
	}
	switch {
	case owner == "StatefulSet" && isPetName(pod[strings.IndexByte(pod, '/')+1:]):
		return kindPet
	case owner == "ReplicaSet":
		return kindReplica
	}
	return kindOther
}

// podKind is what created a pod, as far as the history shows.
type podKind int

const (
	kindUnknown podKind = iota // no recorded create
	kindPet                    // the pet controller, with a pet's name
	kindReplica                // the ReplicaSet controller
	kindOther                  // anyone else
)

// classify says what created the pod with uid and identity pod (namespace/
// name): the create whose answer carried the UID, else the creates of that
// name. A pet is a pod named <set>-<ordinal> that the pet controller created.
func (pc *podCreators) classify(api []history.APICall, uid, pod string) podKind {
	name := pod[strings.IndexByte(pod, '/')+1:]
	if i, ok := pc.byUID[uid]; ok {
		switch api[i].Identity {
		case identityPet:
			if isPetName(name) {
				return kindPet
			}
			return kindOther
		case identityReplicaSet:
			return kindReplica
		}
		return kindOther
	}
	ids := pc.byName[pod]
	switch {
	case ids[identityPet] && isPetName(name):
		return kindPet
	case ids[identityReplicaSet]:
		return kindReplica
	case len(ids) > 0:
		return kindOther
	}
	return kindUnknown
}

// isPetName reports a name of the form <set>-<ordinal>.
func isPetName(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return false
	}
	ord := name[i+1:]
	if ord != "0" && ord[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(ord, 10, 31)
	return err == nil
}

// replicaSetOf is the ReplicaSet a replica's name comes from: the name
// without its generated suffix.
func replicaSetOf(pod string) string {
	if i := strings.LastIndexByte(pod, '-'); i > 0 {
		return pod[:i]
	}
	return pod
}

// stopper notices cancellation cheaply inside long loops: it looks at the
// context every few thousand steps.
type stopper struct {
	ctx context.Context
	n   int
}

func (s *stopper) stopped() bool {
	s.n++
	return s.n&4095 == 0 && s.ctx.Err() != nil
}

// checkRun is one run of a checker: the result it fills in, the context
// that bounds it, and when it began.
type checkRun struct {
	Result
	ctx   context.Context
	start time.Time
}

// startCheck begins a run of checker, which judges guarantees: it bounds
// ctx by opts' timeout and returns the run, the bounded context (the
// run's) and its cancel, which the caller defers.
func startCheck(ctx context.Context, opts Options, checker string, guarantees []string) (checkRun, context.Context, context.CancelFunc) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.timeout())
	return checkRun{Result: Result{Checker: checker, Guarantees: guarantees}, ctx: ctx, start: start}, ctx, cancel
}

// finish returns the result with verdict v, summary and the time the run
// took.
func (r *checkRun) finish(v Verdict, summary string) Result {
	r.Verdict, r.Summary = v, summary
	r.Stats.Duration = time.Since(r.start)
	return r.Result
}

// cancelled finishes Unknown because the run's context ended during the
// check of what.
func (r *checkRun) cancelled(what string) Result {
	return r.finish(Unknown, fmt.Sprintf("check of %s cancelled: %v", what, context.Cause(r.ctx)))
}

// at renders when a ledger entry was recorded: its line in the ledger, the
// recorder time and the scaled clock's reading.
func at(ledger []history.LedgerEntry, i int) string {
	e := ledger[i]
	return fmt.Sprintf("ledger #%d (t=%s, scaled %s)", i, nanos(e.T), e.Scaled.UTC().Format("15:04:05.000"))
}

// callRef renders an API call for a description.
func callRef(c *history.APICall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", c.Identity, c.Verb)
	if c.Subresource != "" {
		fmt.Fprintf(&b, " %s/%s", c.Resource, c.Subresource)
	} else {
		fmt.Fprintf(&b, " %s", c.Resource)
	}
	if c.Namespace != "" && c.Resource != "namespaces" {
		fmt.Fprintf(&b, " %s/%s", c.Namespace, c.Name)
	} else if c.Name != "" {
		fmt.Fprintf(&b, " %s", c.Name)
	}
	if c.GracePeriodSeconds != nil {
		fmt.Fprintf(&b, " grace %d", *c.GracePeriodSeconds)
	}
	fmt.Fprintf(&b, " [%s, %s] %s", nanos(c.Invoke), nanos(c.Return), c.Outcome)
	return b.String()
}

// seconds renders a duration in seconds with millisecond precision.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + " s"
}
