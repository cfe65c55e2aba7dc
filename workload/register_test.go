package workload_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/workload"
)

// The error classes are what the store checker reads: a wrong class would
// turn an unknown outcome into a definite one and the checker unsound.
func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"exists", apierrors.NewAlreadyExists(gr, "k"), workload.ErrClassExists},
		{"conflict", apierrors.NewConflict(gr, "k", errors.New("rv")), workload.ErrClassConflict},
		{"not found", apierrors.NewNotFound(gr, "k"), workload.ErrClassNotFound},
		{"unavailable", apierrors.NewServiceUnavailable("no leader"), workload.ErrClassUnavailable},
		{"timeout 504", apierrors.NewTimeoutError("outcome unknown", 0), ""},
		{"internal 500", apierrors.NewInternalError(errors.New("boom")), ""},
		{"deadline", context.DeadlineExceeded, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := workload.Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// A short run against a real one-member cluster records well-formed ops that
// the store checker accepts, and watches that resume where they left off.
func TestRegisterRecordsCheckableOps(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 0, 1)})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var clients []kubernetes.Interface
	for i := 0; i < 5; i++ {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i)})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	// Three register processes; one watcher that gets what it is
	// delivered, and one that only watches. Watches last 2 s, so each
	// watcher resumes at least once.
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	stats := &workload.Stats{}
	w := &workload.Register{Keys: 2, OpsPerKey: 50, WatchTimeout: 2 * time.Second,
		Watchers: []workload.Watcher{{Name: "a", Client: clients[3], Reader: clients[4]}, {Name: "b", Client: clients[4]}}}
	clients = clients[:3]
	if err := w.RunClients(runCtx, clients, rec, 7, stats); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) < 50 {
		t.Fatalf("only %d ops in a second", len(h.Ops))
	}
	funcs := map[string]int{}
	written := map[string]bool{}
	for _, op := range h.Ops {
		funcs[op.Func]++
		if op.Status == history.StatusUnknown {
			t.Errorf("op %d is unknown on a healthy cluster: %s", op.ID, op.Error)
		}
		if op.Value != "" {
			if written[op.Value] {
				t.Errorf("value %q written twice: CAS on resourceVersion would no longer be CAS on value", op.Value)
			}
			written[op.Value] = true
		}
	}
	for _, f := range []string{"get", "create", "cas", "delete", "list"} {
		if funcs[f] == 0 {
			t.Errorf("no %s ops in %v", f, funcs)
		}
	}
	if got := stats.OK.Load() + stats.Fail.Load() + stats.Unknown.Load(); got != int64(len(h.Ops)) {
		t.Errorf("stats count %d ops, history %d", got, len(h.Ops))
	}
	if len(h.API) < len(h.Ops) {
		t.Errorf("%d API calls recorded for %d ops", len(h.API), len(h.Ops))
	}
	for _, call := range h.API[:5] {
		if call.Identity != apiserver.IdentityWorkload || call.Code == 0 {
			t.Errorf("API call recorded without identity or code: %+v", call)
		}
	}
	checkWatchLines(t, h)
	res := checker.CheckRegister(ctx, h.Ops, checker.Options{Timeout: 30 * time.Second})
	if res.Verdict != checker.Ok {
		t.Errorf("verdict %s: %s", res.Verdict, res.Summary)
	}
}

// checkWatchLines checks the watch lines of a register run on a healthy
// cluster: every watcher lists, then watches from the list's
// resourceVersion, and resumes from the last resourceVersion it received;
// each event carries a value some create or cas wrote; reads and writes
// record the resourceVersion they returned.
func checkWatchLines(t *testing.T, h *history.History) {
	t.Helper()
	lists := map[uint64]history.Op{}
	written := map[string]bool{}
	for _, op := range h.Ops {
		switch {
		case op.Func == "list" && op.Status == history.StatusOK:
			lists[op.ID] = op
		case (op.Func == "create" || op.Func == "cas") && op.Status == history.StatusOK:
			written[op.Value] = true
		}
		if op.Status == history.StatusOK && op.Func != "delete" && op.RV == "" && (op.Func != "get" || op.Found) {
			t.Errorf("op %d %s %s returned no resourceVersion", op.ID, op.Func, op.Key)
		}
	}
	type watcher struct {
		last    string // resourceVersion received last
		streams int
		events  int
		resumes int
	}
	ws := map[string]*watcher{}
	for _, l := range h.Watch {
		w := ws[l.Watcher]
		if w == nil {
			w = &watcher{}
			ws[l.Watcher] = w
		}
		switch l.Phase {
		case history.WatchOpen:
			w.streams++
			if l.Stream != w.streams || l.Resource != workload.LeaseResource || l.Namespace != workload.RegisterNamespace {
				t.Errorf("open line %+v: want stream %d of the register's Leases", l, w.streams)
			}
			switch l.Reason {
			case history.WatchFromList:
				if list, ok := lists[l.List]; !ok || list.RV != l.FromRV {
					t.Errorf("watcher %s stream %d opens from list op %d at RV %s: no such list", l.Watcher, l.Stream, l.List, l.FromRV)
				}
			case history.WatchResume:
				w.resumes++
				if l.FromRV != w.last {
					t.Errorf("watcher %s stream %d resumes from RV %s, but it had received up to %s", l.Watcher, l.Stream, l.FromRV, w.last)
				}
			default:
				t.Errorf("open line without a reason: %+v", l)
			}
			w.last = l.FromRV
		case history.WatchDeliver:
			w.events++
			w.last = l.RV
			if l.Type != "BOOKMARK" && l.Type != "DELETED" && !written[l.Value] {
				t.Errorf("watcher %s delivered %s %s=%q at RV %s, a value no write wrote", l.Watcher, l.Type, l.Key, l.Value, l.RV)
			}
		}
	}
	for _, name := range []string{"a", "b"} {
		w := ws[name]
		if w == nil || w.events == 0 || w.resumes == 0 {
			t.Errorf("watcher %s: %+v, want events and a resumed stream", name, w)
		}
	}
}
