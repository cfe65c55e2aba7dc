package nemesis_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/workload"
)

func TestKillFaults(t *testing.T) {
	c := startNodes(t, 3, 1, durable(t), withScheduler, withControllers)
	cs := admin(t, c)
	rng := seeded()
	ctx := context.Background()
	controllers := slices.Sorted(slices.Values(cluster.ControllerNames))

	for _, name := range []string{"kill-member", "kill-leader"} {
		t.Run(name, func(t *testing.T) {
			if err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			leader := c.LeaderIndex()
			inj := inject(t, c, name, rng)
			i := memberIndex(t, inj.Targets[0])
			if name == "kill-leader" && i != leader {
				t.Errorf("kill-leader killed %s, the leader was %s", inj.Targets[0], cluster.MemberHost(leader))
			}
			if c.MemberUp(i) {
				t.Errorf("member %d still up after %s", i, name)
			}
			heal(t, inj)
			if !c.MemberUp(i) {
				t.Errorf("member %d down after the heal", i)
			}
			if err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a write after the restart", 20*time.Second, func() bool {
				return write(memberClient(t, c, i), "after-"+name, 2*time.Second) != 0
			})
		})
	}

	t.Run("kill-kubelet", func(t *testing.T) {
		runPod(t, c, cs, "survivor", "node-0")
		inj := inject(t, c, "kill-kubelet", rng)
		if inj.Targets[0] != cluster.KubeletComponent("node-0") {
			t.Errorf("targets %v, want the kubelet of node-0", inj.Targets)
		}
		if c.KubeletRunning("node-0") {
			t.Error("kubelet still running")
		}
		if n := running(t, c, "node-0"); n == 0 {
			t.Error("the containers of a killed kubelet stopped")
		}
		before := leaseRenewed(cs, "node-0")
		heal(t, inj)
		if !c.KubeletRunning("node-0") {
			t.Error("kubelet not running after the heal")
		}
		eventually(t, "a renewal by the restarted kubelet", 30*time.Second, func() bool {
			return leaseRenewed(cs, "node-0").After(before)
		})
	})

	t.Run("kill-scheduler", func(t *testing.T) {
		inj := inject(t, c, "kill-scheduler", rng)
		if c.SchedulerRunning() {
			t.Error("scheduler still running")
		}
		heal(t, inj)
		if !c.SchedulerRunning() {
			t.Error("scheduler not running after the heal")
		}
	})

	t.Run("kill-controller", func(t *testing.T) {
		inj := inject(t, c, "kill-controller", rng)
		name := strings.TrimPrefix(inj.Targets[0], cluster.ControllerComponent(""))
		if c.ControllerRunning(name) {
			t.Errorf("controller %s still running", name)
		}
		heal(t, inj)
		if diff := cmp.Diff(controllers, c.RunningControllers()); diff != "" {
			t.Errorf("running controllers after the heal (-want +got):\n%s", diff)
		}
	})

	t.Run("kill-controllers", func(t *testing.T) {
		inj := inject(t, c, "kill-controllers", rng)
		if len(inj.Targets) < 2 {
			t.Errorf("kill-controllers killed %v, want at least two", inj.Targets)
		}
		if got := len(c.RunningControllers()); got != len(controllers)-len(inj.Targets) {
			t.Errorf("%d controllers running after killing %d of %d", got, len(inj.Targets), len(controllers))
		}
		heal(t, inj)
		if diff := cmp.Diff(controllers, c.RunningControllers()); diff != "" {
			t.Errorf("running controllers after the heal (-want +got):\n%s", diff)
		}
	})

	if fault(t, "kill-fencing").Available(cluster.AsTarget(c)) {
		t.Error("kill-fencing claims to be available without a fencing controller")
	}
}

func TestKillFencing(t *testing.T) {
	c := startNodes(t, 1, 1, withFencing)
	inj := inject(t, c, "kill-fencing", seeded())
	if c.ControllerRunning(cluster.ControllerFencing) {
		t.Error("fencing controller still running")
	}
	heal(t, inj)
	if !c.ControllerRunning(cluster.ControllerFencing) {
		t.Error("fencing controller not running after the heal")
	}
}

// Without durable storage a member cannot restart, so crashing one is not
// offered.
func TestKillMemberNeedsDurable(t *testing.T) {
	c := startCluster(t, 3)
	for _, name := range []string{"kill-member", "kill-leader", "kill-kubelet", "kill-scheduler", "kill-controller", "power-failure"} {
		if fault(t, name).Available(cluster.AsTarget(c)) {
			t.Errorf("%s claims to be available on an in-memory cluster with no components", name)
		}
	}
}

// power-failure kills every running store at once and restarts exactly
// those; a member down already is left to the fault that killed it.
func TestFakePowerFailure(t *testing.T) {
	f := kubeLike(everything())
	tgt := richTarget{f}
	stores := []string{"etcd-0", "etcd-1", "etcd-2"}
	for _, tc := range []struct {
		name     string
		downOnce string
		want     []string
	}{
		{name: "all up", want: stores},
		{name: "one down", downOnce: "etcd-1", want: []string{"etcd-0", "etcd-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.downOnce != "" {
				if err := f.Kill(context.Background(), tc.downOnce); err != nil {
					t.Fatal(err)
				}
				defer f.Restart(context.Background(), tc.downOnce)
			}
			inj, calls := fakeInject(t, tgt, f, "power-failure", seeded())
			slices.Sort(calls) // the kills run at once
			if diff := cmp.Diff(prefixed("kill ", tc.want), calls); diff != "" {
				t.Errorf("inject calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, inj.Components); diff != "" {
				t.Errorf("components (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(prefixed("restart ", tc.want), fakeHeal(t, f, inj)); diff != "" {
				t.Errorf("heal calls (-want +got):\n%s", diff)
			}
			if err := inj.Heal(); err != nil {
				t.Errorf("second heal: %v", err)
			}
		})
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// TestPowerFailureLosesNoAcknowledgedWrite is a short crash-consistency run:
// register clients on every member of a durable cluster while the whole
// control plane loses power (every member crashed at once, losing what it
// had not synced) and comes back, again and again. The history must be
// linearizable: a write acknowledged before a power failure is there after
// it, and an unacknowledged one is there either whole or not at all.
func TestPowerFailureLosesNoAcknowledgedWrite(t *testing.T) {
	c := startNodes(t, 3, 0, durable(t))
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	var clients []kubernetes.Interface
	for i := range 6 {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i), Member: i % c.Members()})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stats := &workload.Stats{}
	// Many keys at a bounded rate: the operations an outage leaves unknown
	// stay few per key, so that the search decides every key.
	w := &workload.Register{Keys: 10, OpsPerKey: 100, OpTimeout: time.Second, Limiter: workload.NewLimiter(150, nil, 11)}
	done := make(chan error, 1)
	go func() { done <- w.RunClients(ctx, clients, rec, 11, stats) }()

	// Each power failure strikes while writes are being acknowledged, and
	// the next waits until the restarted cluster acknowledges more.
	progress := func(what string) {
		t.Helper()
		from := stats.OK.Load()
		eventually(t, what, 30*time.Second, func() bool { return stats.OK.Load() >= from+50 })
	}
	const failures = 3
	pf := fault(t, "power-failure")
	for i := range failures {
		progress(fmt.Sprintf("acknowledged operations before power failure %d", i+1))
		inj, err := pf.Inject(ctx, cluster.AsTarget(c), seeded())
		if err != nil {
			t.Fatal(err)
		}
		if len(inj.Components) != c.Members() {
			t.Errorf("power failure %d crashed %v, want every member", i+1, inj.Components)
		}
		time.Sleep(100 * time.Millisecond)
		heal(t, inj)
	}
	progress("acknowledged operations after the last restart")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res := checker.CheckRegister(context.Background(), h.Ops, checker.Options{Timeout: time.Minute})
	if res.Verdict != checker.Ok {
		t.Errorf("register checker after %d power failures: %s: %s %v", failures, res.Verdict, res.Summary, res.Evidence)
	}
	rev := checker.CheckRevisions(context.Background(), h.Ops, checker.Options{})
	if rev.Verdict != checker.Ok {
		t.Errorf("revision checker after %d power failures: %s: %s %v", failures, rev.Verdict, rev.Summary, rev.Evidence)
	}
	t.Logf("%d power failures; ops %s; %s; %s", failures, stats, res.Summary, rev.Summary)
}
