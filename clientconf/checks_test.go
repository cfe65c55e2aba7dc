package clientconf

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func pod(uid, name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid), Name: name, Namespace: "ns", ResourceVersion: rv}}
}

// TestDiffNamesEachDifference: a view that misses an object, holds an
// older version or holds one the server deleted is named as such.
func TestDiffNamesEachDifference(t *testing.T) {
	want := view{"1": {name: "ns/a", rv: "5"}, "2": {name: "ns/b", rv: "7"}}
	got := view{"2": {name: "ns/b", rv: "6"}, "3": {name: "ns/c", rv: "4"}}
	d := diff(want, got, 10)
	wantDiff := []string{
		"extra ns/c (uid 3, rv 4): gone from the server",
		"missing ns/a (uid 1, rv 5)",
		"stale ns/b (uid 2): rv 6, server has 7",
	}
	if !cmp.Equal(d, wantDiff) {
		t.Errorf("diff (-want +got):\n%s", cmp.Diff(wantDiff, d))
	}
	if d := diff(want, want, 10); d != nil {
		t.Errorf("equal views differ: %v", d)
	}
	if d := diff(want, view{}, 1); len(d) != 2 || !strings.Contains(d[1], "1 more") {
		t.Errorf("a limited diff = %v, want one line and a count", d)
	}
}

// TestNotesAddUpAndCatchDisorder: adds, updates and deletes (tombstones
// included) add up to the live view; an update that goes back in time, a
// second add and a delete of an unknown object are reported.
func TestNotesAddUpAndCatchDisorder(t *testing.T) {
	n := newNotes("pods")
	a, b := pod("a", "a", "10"), pod("b", "b", "11")
	n.OnAdd(a, true)
	n.OnAdd(b, true)
	a2 := a.DeepCopy()
	a2.ResourceVersion = "12"
	n.OnUpdate(a, a2)
	n.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: b})
	v, _ := n.snapshot(t.Context())
	if want := (view{a.UID: {name: "ns/a", rv: "12"}}); !cmp.Equal(v, want, cmp.AllowUnexported(entry{})) {
		t.Errorf("view (-want +got):\n%s", cmp.Diff(want, v, cmp.AllowUnexported(entry{})))
	}
	if len(n.backwards) != 0 {
		t.Fatalf("an orderly stream was reported: %v", n.backwards)
	}
	if n.adds != 2 || n.updates != 1 || n.deletes != 1 || n.tombstones != 1 {
		t.Errorf("counts: %s", n.summary())
	}
	n.OnUpdate(a2, a) // 12 back to 10
	n.OnAdd(a, false) // added twice
	n.OnDelete(b)     // deleted, never (again) added
	if len(n.backwards) != 3 {
		t.Errorf("disorder reported: %v, want three reports", n.backwards)
	}
}

// TestLeadershipOverlaps: terms that meet end to start are fine; a term
// that starts before another ends, or while another is still open, is an
// overlap.
func TestLeadershipOverlaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	l := &leadership{terms: []term{
		{identity: "a-1", start: t0, end: t0.Add(10 * time.Second)},
		{identity: "b-1", start: t0.Add(12 * time.Second), end: t0.Add(20 * time.Second)},
		{identity: "a-2", start: t0.Add(20 * time.Second)},
	}}
	if _, overlaps, open := l.check(); len(overlaps) != 0 || !slices.Equal(open, []string{"a-2"}) {
		t.Errorf("sequential terms: overlaps %v, open %v", overlaps, open)
	}
	l.terms = append(l.terms, term{identity: "b-2", start: t0.Add(25 * time.Second)})
	l.terms[1].end = t0.Add(21 * time.Second)
	_, overlaps, open := l.check()
	if len(overlaps) != 2 || len(open) != 2 {
		t.Errorf("overlapping terms: overlaps %v, open %v; want two of each", overlaps, open)
	}
}

// TestServerBug: only 5xx answers other than 503 and 504 are bugs; a
// failed connection is an unknown outcome.
func TestServerBug(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewInternalError(errors.New("boom")), true},
		{apierrors.NewServiceUnavailable("no quorum"), false},
		{apierrors.NewTimeoutError("slow", 1), false},
		{apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a", errors.New("rv")), false},
		{context.DeadlineExceeded, false},
	} {
		if got := serverBug(tc.err); got != tc.want {
			t.Errorf("serverBug(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRequestCountsVerbs: a watch that starts with the current state
// counts as a list; a watch that resumes does not; failures are counted
// by code.
func TestRequestCountsVerbs(t *testing.T) {
	c := newRequestCounts()
	rt := c.wrap(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		code := http.StatusOK
		if req.URL.Query().Get("resourceVersion") == "1" {
			code = http.StatusGone
		}
		return &http.Response{StatusCode: code, Body: http.NoBody}, nil
	}))
	for _, u := range []string{
		"/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
		"/api/v1/pods?watch=true&resourceVersion=1",
		"/api/v1/pods?watch=true&resourceVersion=9",
		"/apis/apps/v1/namespaces/x/replicasets",
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://podsafe"+u, nil)
		if _, err := rt.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
	}
	if got := [4]int{c.lists("pods"), c.watches("pods"), c.get("WATCH pods 410"), c.lists("replicasets")}; got != [4]int{1, 3, 1, 1} {
		t.Errorf("lists, watches, 410s of pods and lists of replicasets = %v, want [1 3 1 1]; counts: %s", got, c.summary())
	}
}
