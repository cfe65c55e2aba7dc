package report

import (
	"sort"
	"strconv"
	"strings"
)

// Guarantee is one entry of the conformance catalogue: a stable ID, the
// family it belongs to and a short title.
type Guarantee struct {
	ID     string `json:"id"`
	Family string `json:"family"`
	Title  string `json:"title"`
}

// Families names each guarantee family.
var Families = map[string]string{
	"LC":    "pod lifecycle",
	"PS":    "pod safety and fencing",
	"GP":    "grace period computation",
	"PR":    "priority and preemption",
	"TS":    "topology spread constraints",
	"STORE": "store consistency",
}

// catalogue lists every guarantee podsafe names, in the order of the
// guarantees document.
var catalogue = []Guarantee{
	{"LC-1", "LC", "phase is one of Pending, Running, Succeeded, Failed, Unknown"},
	{"LC-2", "LC", "phase transitions follow the rules and never go back"},
	{"LC-3", "LC", "a pod UID is scheduled once and runs only on that node"},
	{"LC-4", "LC", "pods on a dead or cut-off node are set Failed after a timeout"},
	{"LC-5", "LC", "container states Waiting, Running, Terminated carry their details"},
	{"LC-6", "LC", "restartPolicy with exponential back-off on the same node"},
	{"LC-7", "LC", "pod conditions PodScheduled, Initialized, ContainersReady, Ready"},
	{"LC-8", "LC", "readinessGates gate Ready"},
	{"LC-9", "LC", "liveness, readiness and startup probes"},
	{"LC-10", "LC", "init containers run one after another before app containers"},
	{"LC-11", "LC", "graceful deletion: preStop, TERM, KILL at the grace deadline"},
	{"LC-12", "LC", "termination restarts with the full grace after a kubelet restart"},
	{"LC-13", "LC", "force deletion removes the object at once"},
	{"LC-14", "LC", "failed pods stay until deleted; terminated-pod GC"},
	{"PS-1", "PS", "a pod executes on exactly one node"},
	{"PS-2", "PS", "creation, scheduling, execution, termination, deletion in order"},
	{"PS-3", "PS", "grace period is a minimum and can only be shortened"},
	{"PS-4", "PS", "kubelet termination timer: preStop, TERM, max(2s, rest), KILL"},
	{"PS-5", "PS", "a crashed kubelet restarts termination with the full grace"},
	{"PS-6", "PS", "force deletion sets grace 0; processes may keep running"},
	{"PS-7", "PS", "ReplicaSet overlap during graceful deletion is expected"},
	{"PS-8", "PS", "only the kubelet removes a pod, after its processes stopped"},
	{"PS-9", "PS", "controllers only delete gracefully, never force"},
	{"PS-10", "PS", "pod GC may force delete pods of deleted nodes"},
	{"PS-11", "PS", "at most one process per pet identity"},
	{"PS-12", "PS", "a partitioned pet set stays consistent"},
	{"PS-13", "PS", "node controller marks pods of a lost node with NodeDown"},
	{"PS-14", "PS", "fence before force-deleting a partitioned node's pods"},
	{"PS-15", "PS", "RWO volumes: compare-and-swap attach, detach after deletion"},
	{"PS-16", "PS", "force deletion warns and requires confirmation"},
	{"PS-17", "PS", "partitioned state is visible to clients"},
	{"PS-T", "PS", "tests cover partitions, concurrency, kubelet and controller failures"},
	{"GP-1", "GP", "kubelet grace period source and 2s minimum"},
	{"GP-2", "GP", "preStop only with grace > 0; its time is subtracted"},
	{"GP-3", "GP", "containers get at least 2s after preStop"},
	{"GP-4", "GP", "an eviction grace override replaces the computed value"},
	{"GP-5", "GP", "effective grace: smallest of current, deletion, override; >= 1s"},
	{"GP-6", "GP", "API server graceful delete grace computation"},
	{"GP-7", "GP", "soft and hard eviction grace and confirmation wait"},
	{"GP-R", "GP", "TERM and KILL bounds where the sources differ"},
	{"PR-1", "PR", "PriorityClass values and a single globalDefault"},
	{"PR-2", "PR", "admission resolves priorityClassName"},
	{"PR-3", "PR", "scheduling queue ordered by priority"},
	{"PR-4", "PR", "preemption evicts lower-priority pods and nominates a node"},
	{"PR-5", "PR", "nominatedNodeName may be lost to others"},
	{"PR-6", "PR", "victims get their graceful termination period"},
	{"PR-7", "PR", "PodDisruptionBudgets honoured best-effort"},
	{"PR-8", "PR", "candidate nodes: removing lower-priority pods must make P fit"},
	{"PR-9", "PR", "no cross-node preemption"},
	{"PR-10", "PR", "no preemption without a preemptor; victims strictly lower"},
	{"PR-11", "PR", "pick the node with the lowest-priority victims"},
	{"PR-12", "PR", "PreemptionPolicy Never"},
	{"PR-13", "PR", "preemption can be disabled"},
	{"PR-14", "PR", "preemption ignores QoS; kubelet eviction ranking"},
	{"PR-15", "PR", "a preempted pod gets an event"},
	{"TS-1", "TS", "constraint fields validated"},
	{"TS-2", "TS", "DoNotSchedule keeps skew within maxSkew"},
	{"TS-3", "TS", "ScheduleAnyway prefers lower skew, still schedules"},
	{"TS-4", "TS", "several constraints are ANDed"},
	{"TS-5", "TS", "only nodes with the topologyKey are considered"},
	{"TS-6", "TS", "only pods in the pod's namespace count"},
	{"TS-7", "TS", "nodeAffinityPolicy Honor and Ignore"},
	{"TS-8", "TS", "nodeTaintsPolicy Honor and Ignore"},
	{"TS-9", "TS", "cluster default constraints"},
	{"TS-10", "TS", "constraints judged at binding time only"},
	{"TS-11", "TS", "pods on tainted nodes are counted"},
	{"TS-12", "TS", "domains are known only from existing nodes"},
	{"TS-E", "TS", "worked examples as test vectors"},
	{"STORE-LIN", "STORE", "the object store is linearizable"},
	{"STORE-WATCH-ORDER", "STORE", "watch streams follow the committed history: in order, no gap, no duplicate, resumed exactly"},
	{"STORE-WATCH-VALUE", "STORE", "every watch event is the change committed at its resourceVersion"},
	{"STORE-READ-AFTER-WATCH", "STORE", "a read that begins after a watch delivered resourceVersion N reflects every write up to N"},
	{"STORE-LIST", "STORE", "a list at resourceVersion R is exactly the committed state at R"},
}

var catalogueIndex = func() map[string]int {
	m := make(map[string]int, len(catalogue))
	for i, g := range catalogue {
		m[g.ID] = i
	}
	return m
}()

// Catalogue returns every guarantee podsafe names, in the order of the
// guarantees document. The slice is a copy.
func Catalogue() []Guarantee {
	return append([]Guarantee(nil), catalogue...)
}

// LookupGuarantee returns the catalogue entry of id. For an ID outside the
// catalogue it returns an entry with the family taken from the ID's prefix, an
// empty title and false.
func LookupGuarantee(id string) (Guarantee, bool) {
	if i, ok := catalogueIndex[id]; ok {
		return catalogue[i], true
	}
	fam, _, _ := strings.Cut(id, "-")
	return Guarantee{ID: id, Family: fam}, false
}

// sortIDs sorts guarantee IDs in catalogue order; IDs outside the catalogue
// come last, by family then number then text.
func sortIDs(ids []string) {
	sort.SliceStable(ids, func(i, j int) bool { return idLess(ids[i], ids[j]) })
}

func idLess(a, b string) bool {
	ia, oka := catalogueIndex[a]
	ib, okb := catalogueIndex[b]
	switch {
	case oka && okb:
		return ia < ib
	case oka != okb:
		return oka
	}
	fa, na, _ := strings.Cut(a, "-")
	fb, nb, _ := strings.Cut(b, "-")
	if fa != fb {
		return fa < fb
	}
	xa, erra := strconv.Atoi(na)
	xb, errb := strconv.Atoi(nb)
	if erra == nil && errb == nil && xa != xb {
		return xa < xb
	}
	return a < b
}
