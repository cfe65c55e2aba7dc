package checker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// rewind records watcher w opening stream n from the older rv, rewound.
func (b *wb) rewind(t int64, w string, n, from int) *wb {
	b.h.Watch = append(b.h.Watch, history.WatchEvent{Watcher: w, Stream: n, Phase: history.WatchOpen, Resource: wRes, Namespace: wNS,
		FromRV: strconv.Itoa(from), Reason: "rewind", T: t}) // workload.WatchRewind
	return b
}

// rewoundWatch is cleanWatch's committed history watched by one watcher
// that lists at RV 4, receives RV 5 and 7, and then rewinds to RV 5: its
// second stream owes exactly the changes after RV 5, again.
func rewoundWatch(second ...string) *wb {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").close(17, "w0", 1, 0)
	b.rewind(18, "w0", 2, 5)
	for i, spec := range second {
		b.ev(int64(30+i), "w0", 2, spec)
	}
	b.close(40, "w0", 2, 0)
	return b
}

func TestWatchRewind(t *testing.T) {
	tests := []struct {
		name    string
		second  []string
		illegal bool
		words   []string
	}{{
		name:   "replays exactly the changes after its RV",
		second: []string{"MODIFIED k1=b@7", "ADDED k2=c@8", "DELETED k1=b@9", "BOOKMARK @10"},
		words:  []string{"1 rewound stream delivered again"},
	}, {
		name:    "skips a change it owes again",
		second:  []string{"ADDED k2=c@8", "DELETED k1=b@9"},
		illegal: true,
		words:   []string{"stream 2", "rewound", "after RV 5", "MODIFIED k1=\"b\" at RV 7", "a gap"},
	}, {
		name:    "repeats a change at or below its RV",
		second:  []string{"ADDED k1=a@5", "MODIFIED k1=b@7"},
		illegal: true,
		words:   []string{"ADDED k1=\"a\" at RV 5", "already received RV 5: a duplicate"},
	}, {
		name:    "bookmark past a change it did not replay",
		second:  []string{"BOOKMARK @8"},
		illegal: true,
		words:   []string{"BOOKMARK at RV 8", "MODIFIED k1=\"b\" at RV 7", "a gap"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := rewoundWatch(tt.second...)
			res := CheckWatchOrder(context.Background(), &b.h, Options{})
			want := Ok
			if tt.illegal {
				want = Illegal
			}
			if res.Verdict != want {
				t.Fatalf("verdict %s, want %s: %s", res.Verdict, want, res.Summary)
			}
			text := res.Summary
			if tt.illegal {
				text = res.Evidence[0].Description
			}
			for _, w := range tt.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
			if v := CheckWatchValues(context.Background(), &b.h, Options{}); v.Verdict != Ok {
				t.Errorf("values: %s: %s", v.Verdict, v.Summary)
			}
		})
	}
}

// Without the rewind reason, a resume carries the watcher's position over:
// the same replay is a duplicate.
func TestWatchResumeFromOlderRVIsNotARewind(t *testing.T) {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").close(17, "w0", 1, 0)
	b.open(18, "w0", 2, 5, 0).ev(20, "w0", 2, "MODIFIED k1=b@7").close(21, "w0", 2, 0)
	res := CheckWatchOrder(context.Background(), &b.h, Options{})
	if res.Verdict != Illegal || !strings.Contains(res.Evidence[0].Description, "a duplicate") {
		t.Fatalf("verdict %s: %s", res.Verdict, res.Summary)
	}
}

// A stream that ends in 410 Gone and the relist after it are counted, in
// the summaries and the figures.
func TestWatchGoneCounted(t *testing.T) {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").close(7, "w0", 1, 0)
	b.rewind(8, "w0", 2, 4).close(9, "w0", 2, 410)
	l2 := b.list(10, 11, 7, "k1=b@7")
	b.open(12, "w0", 3, 7, l2).ev(22, "w0", 3, "ADDED k2=c@8").close(23, "w0", 3, 0)
	order := CheckWatchOrder(context.Background(), &b.h, Options{})
	if order.Verdict != Ok || !strings.Contains(order.Summary, "1 stream ended in 410 Gone") || !strings.Contains(order.Summary, "1 rewound stream") {
		t.Fatalf("order: %s: %s", order.Verdict, order.Summary)
	}
	figs := map[string]float64{}
	for _, f := range order.Figures {
		figs[f.Name] = f.Value
	}
	if figs["watch streams ended in 410 Gone"] != 1 || figs["watch streams rewound"] != 1 || figs["watch streams"] != 3 {
		t.Errorf("figures %v", figs)
	}
	values := CheckWatchValues(context.Background(), &b.h, Options{})
	if values.Verdict != Ok || !strings.Contains(values.Summary, "1 stream ended in 410 Gone") {
		t.Errorf("values: %s: %s", values.Verdict, values.Summary)
	}
}

const podNS = "podsafe-pets"

// podStore records a committed change of pod name at rv.
func podStore(b *wb, typ, name string, rv int, uid, node, phase string, deleting bool) {
	del := ""
	if deleting {
		del = `,"deletionTimestamp":"2026-01-01T00:00:00Z"`
	}
	obj := fmt.Sprintf(`{"kind":"Pod","metadata":{"name":%q,"uid":%q,"resourceVersion":"%d"%s},"spec":{"nodeName":%q},"status":{"phase":%q}}`,
		name, uid, rv, del, node, phase)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreEventType(typ), Resource: podResource, Namespace: podNS,
		Name: name, RV: strconv.Itoa(rv), Object: []byte(obj), T: int64(rv)})
}

// podWatch is a pod created, bound, started and deleted, watched by one
// watcher from a watch-list at RV 1; deliver is the value of the third
// event.
func podWatch(third string) *history.History {
	b := &wb{}
	podStore(b, "ADDED", "db-0", 2, "u1", "", "Pending", false)
	podStore(b, "MODIFIED", "db-0", 3, "u1", "n1", "Pending", false)
	podStore(b, "MODIFIED", "db-0", 4, "u1", "n1", "Running", false)
	podStore(b, "MODIFIED", "db-0", 5, "u1", "n1", "Running", true)
	podStore(b, "DELETED", "db-0", 6, "u1", "n1", "Running", true)
	b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: history.LogStoreEventsEnd, Attrs: map[string]string{"resource": podResource, "rv": "6"}})
	b.h.Ops = append(b.h.Ops, history.Op{ID: 1, Process: 9, Func: "watch-list", Key: podNS + "/pods", Status: history.StatusOK, RV: "1", Invoke: 1, Return: 2})
	b.h.Watch = append(b.h.Watch, history.WatchEvent{Watcher: "m0/pods", Stream: 1, Phase: history.WatchOpen, Resource: podResource, Namespace: podNS,
		FromRV: "1", Reason: history.WatchFromList, List: 1, T: 2})
	for i, ev := range []struct{ typ, value string }{
		{"ADDED", "uid=u1 node= phase=Pending"}, {"MODIFIED", "uid=u1 node=n1 phase=Pending"}, {"MODIFIED", third},
		{"MODIFIED", "uid=u1 node=n1 phase=Running deleting"}, {"DELETED", "uid=u1 node=n1 phase=Running deleting"},
	} {
		b.h.Watch = append(b.h.Watch, history.WatchEvent{Watcher: "m0/pods", Stream: 1, Phase: history.WatchDeliver,
			Type: ev.typ, Key: "db-0", Value: ev.value, RV: strconv.Itoa(i + 2), T: int64(i + 3)})
	}
	return &b.h
}

// Pods are judged by their watch value (UID, node, phase, deletion); the
// read checkers, which judge the register's Leases only, leave no result.
func TestWatchPods(t *testing.T) {
	h := podWatch("uid=u1 node=n1 phase=Running")
	for _, c := range watchChecks {
		r := c.check(context.Background(), h, Options{})
		switch c.name {
		case WatchOrderChecker, WatchValueChecker:
			if r.Verdict != Ok || !strings.Contains(r.Summary, `pods in namespace "podsafe-pets": 1 stream, 5 events`) {
				t.Errorf("%s: %s: %s", c.name, r.Verdict, r.Summary)
			}
		default:
			if r.Checker != "" {
				t.Errorf("%s applies to a pod watch: %s: %s", c.name, r.Verdict, r.Summary)
			}
		}
	}
	stale := podWatch("uid=u1 node=n1 phase=Pending")
	r := CheckWatchValues(context.Background(), stale, Options{})
	if r.Verdict != Illegal || !strings.Contains(r.Evidence[0].Description, `MODIFIED db-0="uid=u1 node=n1 phase=Running" at RV 4`) {
		t.Errorf("a stale pod value: %s: %s", r.Verdict, r.Summary)
	}
	results := Check(context.Background(), h, Options{Checkers: []string{WatchOrderChecker, WatchValueChecker, ReadAfterWatchChecker, ListChecker}})
	for _, r := range results {
		if r.Checker == ReadAfterWatchChecker || r.Checker == ListChecker {
			if r.Verdict == Ok || r.Verdict == Illegal {
				t.Errorf("Check ran %s on a pod watch: %s: %s", r.Checker, r.Verdict, r.Summary)
			}
		}
	}
}

func TestWatchValue(t *testing.T) {
	tests := []struct {
		resource, data, want string
	}{
		{leaseResource, `{"spec":{"holderIdentity":"p1-3"}}`, "p1-3"},
		{leaseResource, `{"spec":{}}`, ""},
		{podResource, `{"metadata":{"uid":"u"},"spec":{"nodeName":"n2"},"status":{"phase":"Failed"}}`, "uid=u node=n2 phase=Failed"},
		{podResource, `{"metadata":{"uid":"u","deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{},"status":{}}`, "uid=u node= phase= deleting"},
		{statefulSetResource, `{"metadata":{"uid":"s","generation":3},"spec":{"replicas":2},"status":{"replicas":1}}`, "uid=s generation=3 replicas=2 current=1"},
		{replicaSetResource, `{"metadata":{"uid":"r","generation":1},"spec":{},"status":{}}`, "uid=r generation=1 replicas=1 current=0"},
		{"nodes", `{"metadata":{"uid":"n"}}`, ""},
	}
	for _, tt := range tests {
		got, err := watchValue(tt.resource, []byte(tt.data))
		if err != nil || got != tt.want {
			t.Errorf("watchValue(%s, %s) = %q, %v; want %q", tt.resource, tt.data, got, err, tt.want)
		}
	}
	if _, err := watchValue(podResource, []byte(`{"metadata":`)); err == nil {
		t.Error("a truncated pod decoded")
	}
}
