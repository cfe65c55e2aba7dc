package workload_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/workload"
)

func TestWatchSets(t *testing.T) {
	mix, err := workload.Lookup("pets+spread")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		w    workload.Workload
		want []workload.WatchSet
	}{
		{&workload.Pets{}, []workload.WatchSet{{Resource: "pods", Namespace: "podsafe-pets"}, {Resource: "statefulsets.apps", Namespace: "podsafe-pets"}}},
		{&workload.Lifecycle{Namespace: "lc"}, []workload.WatchSet{{Resource: "pods", Namespace: "lc"}}},
		{&workload.Priority{}, []workload.WatchSet{{Resource: "pods", Namespace: "podsafe-priority"}}},
		{mix, []workload.WatchSet{
			{Resource: "pods", Namespace: "podsafe-pets"}, {Resource: "statefulsets.apps", Namespace: "podsafe-pets"},
			{Resource: "pods", Namespace: "podsafe-spread"}, {Resource: "replicasets.apps", Namespace: "podsafe-spread"},
		}},
		{&workload.Register{}, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, workload.WatchSets(tt.w)); diff != "" {
			t.Errorf("WatchSets(%s) (-want +got):\n%s", tt.w.Name(), diff)
		}
	}
	// A variant watches the namespace named after it, as it runs in.
	rg, err := workload.Lookup("replicas-grace")
	if err != nil {
		t.Fatal(err)
	}
	if got := workload.WatchSets(rg); len(got) != 2 || got[0].Namespace != "podsafe-replicas-grace" || got[1].Resource != "replicasets.apps" {
		t.Errorf("WatchSets(replicas-grace) = %v", got)
	}
	// The workload itself keeps its zero fields: its own defaults apply
	// when it runs.
	p := &workload.Pets{}
	workload.WatchSets(p)
	if p.Namespace != "" || p.Sets != 0 {
		t.Errorf("WatchSets changed the workload: %+v", p.SetKnobs)
	}
}

// Two watchers of a namespace's pods on a cluster whose watch window holds
// 40 events, while a writer churns pods and, faster, Leases elsewhere (so
// the window's floor runs ahead of the pods' resourceVersions): the
// watchers rewind, get 410 Gone, relist and carry on, and the watch
// checkers find every stream exact against the store's committed history.
func TestSetWatchersReachTheFloor(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 0, 1), WatchWindow: 40})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	client := func(i int) kubernetes.Interface {
		rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i)})
		rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	const ns = "watched"
	writer := client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	for _, n := range []string{ns, "churn"} {
		if _, err := writer.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The store lines: every pod change, from member 0's store.
	storeEvents, err := c.Store(0).Watch(ctx, "pods", 1)
	if err != nil {
		t.Fatal(err)
	}
	var recWG sync.WaitGroup
	recWG.Add(1)
	var last uint64
	go func() {
		defer recWG.Done()
		for ev := range storeEvents {
			last = ev.Object.RV
			rec.Store(history.StoreEvent{Type: history.StoreEventType(ev.Type), Resource: "pods", Namespace: ev.Object.Key.Namespace,
				Name: ev.Object.Key.Name, RV: strconv.FormatUint(ev.Object.RV, 10), Object: ev.Object.Data})
		}
	}()
	sw := &workload.SetWatchers{
		Sets: []workload.WatchSet{{Resource: workload.PodResource, Namespace: ns}},
		Watchers: []workload.Watcher{
			{Name: "a", Client: client(1), Rewind: 100},
			{Name: "b", Client: client(2), Rewind: 50},
		},
		Recorder: rec, Seed: 3, FirstProcess: 10, WatchTimeout: 2 * time.Second,
	}
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("p%d", i%4)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
		if i%8 < 4 {
			writer.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}) //nolint:errcheck // churn
		} else {
			writer.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}) //nolint:errcheck // churn
		}
		for j := range 3 {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("l%d-%d", i, j), Namespace: "churn"}}
			writer.CoordinationV1().Leases("churn").Create(ctx, l, metav1.CreateOptions{}) //nolint:errcheck // churn
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recWG.Wait()
	rec.Log(history.LogStoreEventsEnd, map[string]string{"resource": "pods", "rv": strconv.FormatUint(last, 10)})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	gone, rewinds, replays, lists, events := 0, 0, 0, 0, 0
	rewound := map[string]bool{} // watcher -> its open stream rewound
	for _, l := range h.Watch {
		switch {
		case l.Phase == history.WatchOpen:
			rewound[l.Watcher] = l.Reason == workload.WatchRewind
			if rewound[l.Watcher] {
				rewinds++
			}
		case l.Phase == history.WatchClose && l.Code == 410:
			gone++
		case l.Phase == history.WatchClose && rewound[l.Watcher]:
			replays++
		case l.Phase == history.WatchDeliver && l.Type != "BOOKMARK":
			events++
			if !strings.HasPrefix(l.Value, "uid=") {
				t.Errorf("pod event without a watch value: %+v", l)
			}
		}
		if l.Phase == history.WatchOpen && (l.Resource != "pods" || l.Namespace != ns || !strings.HasSuffix(l.Watcher, "/"+ns+"/pods")) {
			t.Errorf("open line %+v: want a watch of the pods of %s", l, ns)
		}
	}
	for _, op := range h.Ops {
		if op.Func != workload.FuncWatchList || op.Key != ns+"/pods" || op.Process < 10 {
			t.Errorf("op %+v: want only the watchers' lists", op)
		}
		if op.Status == history.StatusOK {
			lists++
		}
	}
	ends := 0
	for _, l := range h.Logs {
		if l.Msg == workload.LogWatcherEnd {
			ends++
		}
	}
	t.Logf("%d events, %d rewinds (%d replayed), %d 410 Gone, %d lists", events, rewinds, replays, gone, lists)
	if events == 0 || replays == 0 || gone == 0 || lists <= 2 || ends != 2 {
		t.Errorf("%d events, %d rewinds (%d replayed), %d 410 Gone, %d lists, %d end lines: want some of each, a relist after a 410, an end line per watcher",
			events, rewinds, replays, gone, lists, ends)
	}
	for _, check := range []func(context.Context, *history.History, checker.Options) checker.Result{checker.CheckWatchOrder, checker.CheckWatchValues} {
		if r := check(context.Background(), h, checker.Options{}); r.Verdict != checker.Ok {
			t.Errorf("%s: %s: %s %v", r.Checker, r.Verdict, r.Summary, r.Evidence)
		} else {
			t.Log(r.Summary)
		}
	}
}
