package record

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/raftstore"
)

// checkEnd checks the end line: the resource, the namespace, and an rv
// at least the last store line's.
func checkEnd(t *testing.T, h *history.History, resource, namespace string) uint64 {
	t.Helper()
	ends := logsWith(h, history.LogStoreEventsEnd)
	if len(ends) != 1 {
		t.Fatalf("end lines: %+v", ends)
	}
	e := ends[0].Attrs
	if e["resource"] != resource || e["namespace"] != namespace {
		t.Errorf("end line %v, want resource %q namespace %q", e, resource, namespace)
	}
	rv := rvNum(t, e["rv"])
	if n := len(h.Store); n > 0 && rv < rvNum(t, h.Store[n-1].RV) {
		t.Errorf("end line rv %d is below the last store line's %s", rv, h.Store[n-1].RV)
	}
	return rv
}

// checkIncreasing checks that the store lines' resourceVersions strictly
// increase: no change twice.
func checkIncreasing(t *testing.T, evs []history.StoreEvent) {
	t.Helper()
	var last uint64
	for i, e := range evs {
		rv := rvNum(t, e.RV)
		if rv <= last {
			t.Errorf("store line %d at rv %d after rv %d", i, rv, last)
		}
		last = rv
	}
}

// Creates, updates and deletes become exactly the store's own changes,
// the pod that was there before the list included (recorded ADDED at its
// resourceVersion, as the embedded recorder records its creation).
func TestFollowResourceRecordsEveryChange(t *testing.T) {
	c, cfg := startCluster(t, 1)
	w := writes{t: t, cs: admin(t, c, 0), ctx: context.Background()}
	w.create("default", "before")

	f := follow(t, cfg, podsGVR, "")
	f.waitLogs(LogStoreEventsListed, 1)
	w.create("default", "p1")
	w.relabel("default", "p1", "2")
	w.create("other", "p2")
	w.delete("default", "p1")
	w.relabel("other", "p2", "3")
	w.delete("other", "p2")
	last := w.create("default", "p3")
	f.waitRV(last.ResourceVersion)
	h := f.stop()

	checkSameAsStore(t, h.Store, storeEvents(t, c, 0, "pods", rvNum(t, last.ResourceVersion)))
	checkIncreasing(t, h.Store)
	checkEnd(t, h, "pods", "")
	listed := logsWith(h, LogStoreEventsListed)
	if len(listed) != 1 || listed[0].Attrs["reason"] != "start" || listed[0].Attrs["objects"] != "1" || listed[0].Attrs["recorded"] != "1" {
		t.Errorf("listed lines: %+v", listed)
	}
	if lost := logsWith(h, history.LogStoreEventsLost); len(lost) != 0 {
		t.Errorf("lost lines: %+v", lost)
	}
}

// A watch whose connections are cut resumes from the last resourceVersion
// it recorded: the changes made while it was down are recorded once each,
// none missing.
func TestFollowResourceResumesAfterCut(t *testing.T) {
	c, cfg := startCluster(t, 1)
	var flt faults
	flt.install(cfg)
	w := writes{t: t, cs: admin(t, c, 0), ctx: context.Background()}

	// Watches long enough that the one which delivered b is still open
	// when the cut comes (with 1 s watches the cut can fall between two,
	// and then nothing fails).
	f := followWith(t, cfg, podsGVR, "", time.Minute)
	f.waitLogs(LogStoreEventsListed, 1)
	w.create("default", "a")
	p := w.create("default", "b")
	f.waitRV(p.ResourceVersion)

	flt.mu.Lock()
	before := flt.watches
	flt.mu.Unlock()
	flt.cutAndHold()
	w.relabel("default", "a", "down")
	w.create("default", "c")
	w.delete("default", "b")
	flt.release(0, "")
	w.relabel("default", "c", "up")
	last := w.create("default", "d")
	f.waitRV(last.ResourceVersion)
	h := f.stop()

	checkSameAsStore(t, h.Store, storeEvents(t, c, 0, "pods", rvNum(t, last.ResourceVersion)))
	checkIncreasing(t, h.Store)
	checkEnd(t, h, "pods", "")
	if n := len(logsWith(h, LogStoreEventsListed)); n != 1 {
		t.Errorf("%d lists, want 1: the watch must resume, not relist", n)
	}
	// A cut stream may end as an error or, as the transport sees a closed
	// connection, as a plain end of stream (client-go takes both alike):
	// either way the follower must have watched again.
	flt.mu.Lock()
	after := flt.watches
	flt.mu.Unlock()
	if after <= before {
		t.Errorf("no watch request after the cut (%d before, %d after): the cut watch was not resumed", before, after)
	}
}

// A watch stream that stays silent past its timeout (a connection a
// partition killed without a word) is given up and resumed.
func TestFollowResourceResumesStalledWatch(t *testing.T) {
	slack := watchSlack
	watchSlack = 200 * time.Millisecond
	t.Cleanup(func() { watchSlack = slack })
	c, cfg := startCluster(t, 1)
	var flt faults
	flt.install(cfg)
	w := writes{t: t, cs: admin(t, c, 0), ctx: context.Background()}
	f := follow(t, cfg, podsGVR, "")
	f.waitLogs(LogStoreEventsListed, 1)
	p := w.create("default", "a")
	f.waitRV(p.ResourceVersion)
	flt.cutAndHold()
	flt.mu.Lock()
	flt.stall = 1
	flt.mu.Unlock()
	flt.release(0, "")
	w.create("default", "b")
	last := w.relabel("default", "a", "x")
	f.waitRV(last.ResourceVersion)
	h := f.stop()
	checkSameAsStore(t, h.Store, storeEvents(t, c, 0, "pods", rvNum(t, last.ResourceVersion)))
	flt.mu.Lock()
	defer flt.mu.Unlock()
	if flt.stall != 0 {
		t.Error("no watch stalled")
	}
}

// A watch answered 410 Gone notes the loss as the embedded recorder does,
// relists, and records the objects changed in the gap at their
// resourceVersions; deletions in the gap are not made up. Both of
// kube-apiserver's ways of saying Gone are handled.
func TestFollowResourceRelistsAfterGone(t *testing.T) {
	for _, as := range []string{"event", "status"} {
		t.Run(as, func(t *testing.T) {
			c, cfg := startCluster(t, 1)
			var flt faults
			flt.install(cfg)
			w := writes{t: t, cs: admin(t, c, 0), ctx: context.Background()}

			f := follow(t, cfg, podsGVR, "")
			f.waitLogs(LogStoreEventsListed, 1)
			w.create("default", "keep")
			w.create("default", "gone")
			before := w.create("default", "mod")
			f.waitRV(before.ResourceVersion)

			flt.cutAndHold()
			w.delete("default", "gone")
			mod := w.relabel("default", "mod", "gap")
			added := w.create("default", "new")
			flt.release(1, as)
			f.waitLogs(LogStoreEventsListed, 2)
			after := w.create("default", "after")
			f.waitRV(after.ResourceVersion)
			h := f.stop()

			lost := logsWith(h, history.LogStoreEventsLost)
			if len(lost) != 1 || lost[0].Attrs["resource"] != "pods" {
				t.Fatalf("lost lines: %+v", lost)
			}
			afterRV := rvNum(t, lost[0].Attrs["after_rv"])
			if afterRV < rvNum(t, before.ResourceVersion) || afterRV >= rvNum(t, mod.ResourceVersion) {
				t.Errorf("lost after rv %d, want from %s (the last change recorded) to before %s (the first in the gap)",
					afterRV, before.ResourceVersion, mod.ResourceVersion)
			}
			var got []string
			for _, e := range h.Store {
				got = append(got, string(e.Type)+" "+e.Name+"@"+e.RV)
			}
			want := []string{
				"ADDED keep@", "ADDED gone@", "ADDED mod@" + before.ResourceVersion,
				"MODIFIED mod@" + mod.ResourceVersion, "ADDED new@" + added.ResourceVersion,
				"ADDED after@" + after.ResourceVersion,
			}
			if len(got) != len(want) {
				t.Fatalf("store lines %q, want %q", got, want)
			}
			for i := range want {
				if len(got[i]) < len(want[i]) || got[i][:len(want[i])] != want[i] {
					t.Errorf("store line %d: %q, want %q", i, got[i], want[i])
				}
			}
			checkIncreasing(t, h.Store)
			relist := logsWith(h, LogStoreEventsListed)[1].Attrs
			if relist["reason"] != "relist" || relist["objects"] != "3" || relist["recorded"] != "2" || relist["vanished"] != "1" {
				t.Errorf("relist line %v", relist)
			}
			checkEnd(t, h, "pods", "")
		})
	}
}

// A namespace's follower records that namespace only and says so in its
// end line.
func TestFollowResourceNamespace(t *testing.T) {
	c, cfg := startCluster(t, 1)
	w := writes{t: t, cs: admin(t, c, 0), ctx: context.Background()}
	f := follow(t, cfg, podsGVR, "ns-a")
	f.waitLogs(LogStoreEventsListed, 1)
	w.create("ns-b", "x")
	w.create("ns-a", "y")
	w.delete("ns-b", "x")
	last := w.create("ns-a", "z")
	f.waitRV(last.ResourceVersion)
	h := f.stop()
	var want []history.StoreEvent
	for _, e := range storeEventsAsHistory(storeEvents(t, c, 0, "pods", rvNum(t, last.ResourceVersion))) {
		if e.Namespace == "ns-a" {
			want = append(want, e)
		}
	}
	if len(h.Store) != len(want) || len(want) != 2 {
		t.Fatalf("store lines %+v, want %+v", h.Store, want)
	}
	for i := range want {
		if h.Store[i].Name != want[i].Name || h.Store[i].RV != want[i].RV || h.Store[i].Type != want[i].Type {
			t.Errorf("store line %d: %+v, want %+v", i, h.Store[i], want[i])
		}
	}
	checkEnd(t, h, "pods", "ns-a")
}

// A resource of a group is spelled as the embedded store spells it, and
// its objects carry their kind.
func TestFollowResourceGroupResource(t *testing.T) {
	c, cfg := startCluster(t, 1)
	cs := admin(t, c, 0)
	ctx := context.Background()
	replicas := int32(0)
	mk := func(name string) *appsv1.StatefulSet {
		ss, err := cs.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas, ServiceName: name,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	mk("listed")
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	f := follow(t, cfg, gvr, "")
	f.waitLogs(LogStoreEventsListed, 1)
	last := mk("watched")
	f.waitRV(last.ResourceVersion)
	h := f.stop()
	if StoreResource(gvr) != "statefulsets.apps" {
		t.Errorf("StoreResource = %q", StoreResource(gvr))
	}
	checkSameAsStore(t, h.Store, storeEvents(t, c, 0, "statefulsets.apps", rvNum(t, last.ResourceVersion)))
	for _, e := range h.Store {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(e.Object, &tm); err != nil || tm.Kind != "StatefulSet" || tm.APIVersion != "apps/v1" {
			t.Errorf("%s object's type %+v, %v", e.Name, tm, err)
		}
	}
	checkEnd(t, h, "statefulsets.apps", "")
}

// The member the follower talks to crashes: it resumes on another member
// from where it was, with nothing missing or twice.
func TestFollowResourceSurvivesMemberCrash(t *testing.T) {
	c, cfg := startCluster(t, 3)
	w := writes{t: t, cs: admin(t, c, 1), ctx: context.Background(), retry: true}
	f := follow(t, cfg, podsGVR, "")
	f.waitLogs(LogStoreEventsListed, 1)
	p := w.create("default", "a")
	f.waitRV(p.ResourceVersion)
	if err := c.CrashMember(0); err != nil {
		t.Fatal(err)
	}
	w.create("default", "b")
	w.relabel("default", "a", "x")
	last := w.create("default", "c")
	f.waitRV(last.ResourceVersion)
	h := f.stop()
	checkSameAsStore(t, h.Store, storeEvents(t, c, 1, "pods", rvNum(t, last.ResourceVersion)))
	checkEnd(t, h, "pods", "")
}

// Without a reachable API the follower records nothing, writes no end
// line, and says why.
func TestFollowResourceNeverListed(t *testing.T) {
	_, cfg := startCluster(t, 1)
	var flt faults
	flt.install(cfg)
	flt.cutAndHold()
	cfg.Dial = nil
	cfg.Host = "http://127.0.0.1:1" // nothing listens
	rec, path := newRecorder(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := FollowResource(ctx, cfg, podsGVR, "", rec, FollowOptions{RetryInterval: 10 * time.Millisecond})
	if err == nil {
		t.Fatal("FollowResource succeeded with no API")
	}
	rec.Close()
	h := load(t, path)
	if len(h.Store) != 0 || len(logsWith(h, history.LogStoreEventsEnd)) != 0 {
		t.Errorf("recorded %+v, logs %+v", h.Store, h.Logs)
	}
	if fails := logsWith(h, LogStoreEventsFailing); len(fails) != 1 {
		t.Errorf("failure lines: %+v", fails)
	}
}

func storeEventsAsHistory(evs []raftstore.Event) []history.StoreEvent {
	out := make([]history.StoreEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, history.StoreEvent{Type: history.StoreEventType(e.Type), Resource: e.Object.Key.Resource,
			Namespace: e.Object.Key.Namespace, Name: e.Object.Key.Name, RV: strconv.FormatUint(e.Object.RV, 10), Object: e.Object.Data})
	}
	return out
}
