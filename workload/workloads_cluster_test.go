package workload_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/workload"
)

// clusterRun is what one short run of a workload against a real cluster
// left behind.
type clusterRun struct {
	name    string
	ns      string
	path    string
	history *history.History
	ledger  *kubelet.MemoryLedger
	stats   *workload.Stats
	// finalFrom is the recorder time the final phase began (-1: w has
	// none).
	finalFrom int64
}

// runOnCluster starts a cluster with what w needs (3 nodes in 2 zones, time
// scale 100), runs w with 3 processes for wall time d, and loads the
// history.
func runOnCluster(t *testing.T, w workload.Workload, ns string, d time.Duration) *clusterRun {
	t.Helper()
	needs := w.Needs()
	ledger := &kubelet.MemoryLedger{}
	topo := cluster.DefaultTopology(1, 3, 2)
	c := cluster.StartForTest(t, cluster.Config{Topology: topo, TimeScale: 100,
		Kubelets: needs.Kubelets, Scheduler: needs.Scheduler, Controllers: needs.Controllers, Ledger: ledger})
	if len(topo.Nodes) < needs.MinNodes {
		t.Fatalf("%s needs %d nodes, the test cluster has %d", w.Name(), needs.MinNodes, len(topo.Nodes))
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 11, Scenario: w.Name()})
	if err != nil {
		t.Fatal(err)
	}
	env := workload.Env{Recorder: rec, Seed: 11, Stats: &workload.Stats{}, Clock: c.Clock(),
		TimeScale: c.Config().TimeScale, Zones: map[string]string{}, Concurrency: 3}
	for _, n := range topo.Nodes {
		env.Nodes = append(env.Nodes, n.Name)
		env.Zones[n.Name] = n.Labels[cluster.LabelZone]
	}
	zones := map[string]bool{}
	for _, z := range env.Zones {
		zones[z] = true
	}
	if len(zones) < needs.Zones {
		t.Fatalf("%s needs %d zones, the test cluster has %d", w.Name(), needs.Zones, len(zones))
	}
	for i := 0; i < env.Concurrency; i++ {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i), Member: i % c.Members()})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		env.Clients = append(env.Clients, cs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := w.Run(ctx, env); err != nil {
		t.Fatalf("%s: %v", w.Name(), err)
	}
	finalFrom := int64(-1)
	if f, ok := w.(workload.Finisher); ok {
		// The run's end, then its final phase, as a run makes it once
		// every fault healed (this cluster has none).
		finalFrom = rec.Now().Nanoseconds()
		if err := f.Finish(context.Background(), env); err != nil {
			t.Fatalf("%s final phase: %v", w.Name(), err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d ops (%s), %d API calls, %d ledger entries", w.Name(), len(h.Ops), env.Stats, len(h.API), len(ledger.Entries()))
	return &clusterRun{name: w.Name(), ns: ns, path: path, history: h, ledger: ledger, stats: env.Stats, finalFrom: finalFrom}
}

// checkOps asserts what every workload's history must show: each invoke
// line paired with exactly one complete line, every Func prefixed with the
// workload's name, some operations that succeeded, the counts in Stats
// matching the history, and API calls recorded under the workload identity.
func (r *clusterRun) checkOps(t *testing.T) map[string]int {
	t.Helper()
	f, err := os.Open(r.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	invoked, completed := map[uint64]int{}, map[uint64]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Kind history.Kind `json:"kind"`
			ID   uint64       `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("history line %q: %v", sc.Text(), err)
		}
		switch line.Kind {
		case history.KindInvoke:
			invoked[line.ID]++
		case history.KindComplete:
			completed[line.ID]++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for id, n := range invoked {
		if n != 1 || completed[id] != 1 {
			t.Errorf("op %d: %d invoke lines, %d complete lines; want one of each", id, n, completed[id])
		}
	}
	for id := range completed {
		if invoked[id] == 0 {
			t.Errorf("op %d completed without an invoke line", id)
		}
	}

	funcs, failed := map[string]int{}, map[string]int{}
	ok := 0
	for _, op := range r.history.Ops {
		if !strings.HasPrefix(op.Func, r.name+":") {
			t.Errorf("op %d: Func %q lacks the prefix %q", op.ID, op.Func, r.name+":")
		}
		if op.Status == history.StatusOK {
			ok++
			funcs[op.Func]++
		} else {
			failed[op.Func+"/"+op.Error]++
		}
		if op.Status == history.StatusUnknown && op.Return != (1<<63-1) {
			t.Errorf("op %d unknown but returns at %d", op.ID, op.Return)
		}
	}
	if len(r.history.Ops) == 0 || ok == 0 {
		t.Fatalf("%d ops recorded, %d succeeded", len(r.history.Ops), ok)
	}
	if got := r.stats.OK.Load() + r.stats.Fail.Load() + r.stats.Unknown.Load(); got != int64(len(r.history.Ops)) {
		t.Errorf("stats count %d ops, the history %d", got, len(r.history.Ops))
	}
	if r.stats.OK.Load() != int64(ok) {
		t.Errorf("stats count %d ok ops, the history %d", r.stats.OK.Load(), ok)
	}
	calls := 0
	for _, call := range r.history.API {
		if call.Identity == apiserver.IdentityWorkload {
			calls++
		}
	}
	if calls < len(r.history.Ops) {
		t.Errorf("%d API calls of the workload identity for %d ops", calls, len(r.history.Ops))
	}
	t.Logf("successful ops: %v; failed: %v", funcs, failed)
	return funcs
}

// ledgerCount counts the ledger entries of the run's namespace with action.
func (r *clusterRun) ledgerCount(action kubelet.LedgerAction) int {
	n := 0
	for _, e := range r.ledger.Entries() {
		if e.Namespace == r.ns && e.Action == action {
			n++
		}
	}
	return n
}

// wantLedger asserts the run's containers started, and that the ledger
// shows the other actions too. The pods outlive the run, so a slow machine
// gets time to catch up; how long it takes is not judged.
func (r *clusterRun) wantLedger(t *testing.T, actions ...kubelet.LedgerAction) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range append([]kubelet.LedgerAction{kubelet.ActionStart}, actions...) {
		for r.ledgerCount(a) == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if r.ledgerCount(a) == 0 {
			t.Errorf("the ledger has no %q entries in namespace %s", a, r.ns)
		}
	}
}

// wantFuncs asserts that each named operation succeeded at least once.
func wantFuncs(t *testing.T, got map[string]int, funcs ...string) {
	t.Helper()
	for _, f := range funcs {
		if got[f] == 0 {
			t.Errorf("no successful %s op in %v", f, got)
		}
	}
}

const clusterRunTime = 5 * time.Second

func TestPetsOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Pets{}, "podsafe-pets", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "pets:create-namespace", "pets:create", "pets:scale")
	// Pets write their volumes (PS-15): the storage server's ledger entries
	// carry the pet's volume <namespace>.data-<pet>.
	r.wantLedger(t, kubelet.ActionWrite)
	for _, e := range r.ledger.Entries() {
		if e.Namespace == r.ns && e.Action == kubelet.ActionWrite && !strings.HasPrefix(e.Volume, r.ns+".data-db") {
			t.Errorf("pet %s wrote volume %q, want %s.data-<pet>", e.Pod, e.Volume, r.ns)
		}
	}
	r.checkFinal(t, "db", 3)
}

func TestReplicasOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Replicas{}, "podsafe-replicas", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "replicas:create-namespace", "replicas:create", "replicas:scale")
	r.wantLedger(t)
	r.checkFinal(t, "web", 3)
}

// checkFinal asserts the final phase of a set workload with sets sets: as
// process 0, for each set in turn but the last a list of its pods and,
// when the list found one, the deletion of one of them with the final
// grace; then the deletion of the last set.
func (r *clusterRun) checkFinal(t *testing.T, prefix string, sets int) {
	t.Helper()
	if r.finalFrom < 0 {
		t.Fatalf("%s has no final phase", r.name)
	}
	var final []history.Op
	for _, op := range r.history.Ops {
		if op.Invoke >= r.finalFrom {
			final = append(final, op)
		}
	}
	deleted, i := 0, 0
	if r.name == "deployments" {
		// A Deployment's final phase rolls each out first.
		for set := 0; set < sets; set++ {
			key := fmt.Sprintf("%s/%s%d", r.ns, prefix, set)
			if i == len(final) {
				t.Fatalf("the final phase ended before it rolled %s out", key)
			}
			if op := final[i]; op.Func != "deployments:rollout" || op.Key != key || op.Status != history.StatusOK || !strings.HasPrefix(op.Value, "revision=") {
				t.Fatalf("final op %d: %s %s %s (%s), want deployments:rollout %s revision=N, ok", i, op.Func, op.Key, op.Value, op.Status, key)
			}
			i++
		}
		final = final[i:]
		i = 0
	}
	for set := 0; set < sets; set++ {
		key := fmt.Sprintf("%s/%s%d", r.ns, prefix, set)
		if set == sets-1 && sets >= 2 {
			// The last set is deleted whole, with a propagation policy
			// drawn from the seed.
			if i == len(final) {
				t.Fatalf("the final phase ended before it deleted %s: %d ops", key, len(final))
			}
			del := final[i]
			i++
			policy, _ := strings.CutPrefix(del.Value, "propagation=")
			if del.Func != r.name+":delete" || del.Key != key || del.Process != 0 || del.Status != history.StatusOK ||
				!slices.Contains([]string{"Background", "Foreground", "Orphan"}, policy) {
				t.Fatalf("final op %d: %s %s %s by process %d (%s), want %s:delete %s propagation=<policy> by process 0, ok", i-1, del.Func, del.Key, del.Value, del.Process, del.Status, r.name, key)
			}
			continue
		}
		if i == len(final) {
			t.Fatalf("the final phase ended before it listed %s: %d ops", key, len(final))
		}
		list := final[i]
		i++
		if list.Func != r.name+":list-pods" || list.Key != key || list.Process != 0 || list.Status != history.StatusOK {
			t.Fatalf("final op %d: %s %s by process %d (%s), want %s:list-pods %s by process 0, ok", i-1, list.Func, list.Key, list.Process, list.Status, r.name, key)
		}
		if n := summaryCount(list.Output, "pods") - summaryCount(list.Output, "terminating"); n <= 0 {
			continue // no pod to delete
		}
		if i == len(final) {
			t.Fatalf("the final list of %s found pods (%s) and no deletion followed", key, list.Output)
		}
		del := final[i]
		i++
		if del.Func != r.name+":delete-pod" || !strings.HasPrefix(del.Key, key+"-") || del.Value != fmt.Sprintf("grace=%d", workload.FinalGrace) || del.Status != history.StatusOK {
			t.Fatalf("after the final list of %s (%s): %s %s %s (%s), want a delete-pod of one of its pods with grace=%d", key, list.Output, del.Func, del.Key, del.Value, del.Status, workload.FinalGrace)
		}
		deleted++
	}
	if i != len(final) {
		t.Errorf("the final phase made %d ops, %d more than a list of each set and a deletion from each that had a pod, and the last set's deletion", len(final), len(final)-i)
	}
	if deleted == 0 {
		// Every list found each set's pods all terminating or none: so the
		// schedule went, and the deletions that follow a list that found a
		// pod are asserted above.
		t.Logf("the final phase found no pod to delete: %d ops", len(final))
	}
}

// summaryCount reads count name of a list's output ("pods=3 running=2
// terminating=1"), 0 when it is not there.
func summaryCount(output, name string) int {
	for _, f := range strings.Fields(output) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func TestDeploymentsOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Deployments{}, "podsafe-deployments", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "deployments:create-namespace", "deployments:create", "deployments:scale", "deployments:rollout")
	r.wantLedger(t)
	r.checkFinal(t, "app", 3)
}

func TestPriorityOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Priority{}, "podsafe-priority", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "priority:create-namespace", "priority:create-class", "priority:create-pdb", "priority:create-pod")
	r.wantLedger(t)
}

func TestSpreadOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Spread{}, "podsafe-spread", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "spread:create-namespace", "spread:create")
	r.wantLedger(t)
}

func TestLifecycleOnCluster(t *testing.T) {
	r := runOnCluster(t, &workload.Lifecycle{}, "podsafe-lifecycle", clusterRunTime)
	funcs := r.checkOps(t)
	wantFuncs(t, funcs, "lifecycle:create-namespace", "lifecycle:create-pod")
	r.wantLedger(t)
}
