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
// the store checker accepts.
func TestRegisterRecordsCheckableOps(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 0, 1)})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var clients []kubernetes.Interface
	for i := 0; i < 3; i++ {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i)})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stats := &workload.Stats{}
	w := &workload.Register{Keys: 2, OpsPerKey: 50}
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
	for _, f := range []string{"get", "create", "cas", "delete"} {
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
	res := checker.CheckRegister(ctx, h.Ops, checker.Options{Timeout: 30 * time.Second})
	if res.Verdict != checker.Ok {
		t.Errorf("verdict %s: %s", res.Verdict, res.Summary)
	}
}
