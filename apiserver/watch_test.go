package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/raftstore"
)

// rawEvent is one decoded watch event.
type rawEvent struct {
	Type   string
	Name   string
	RV     string
	Kind   string
	Phase  string
	Node   string // spec.nodeName
	Annots map[string]string
}

// watchStream reads a raw watch response.
type watchStream struct {
	t      *testing.T
	resp   *http.Response
	events chan rawEvent
	done   chan struct{}
}

// openWatch starts a watch on path as identity.
func (e *testEnv) openWatch(t *testing.T, path, identity string) *watchStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenOf(identity))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := e.http.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("watch %s: HTTP %d", path, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("watch Content-Type = %q", ct)
	}
	ws := &watchStream{t: t, resp: resp, events: make(chan rawEvent, 100), done: make(chan struct{})}
	go func() {
		defer close(ws.done)
		defer close(ws.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Type   string `json:"type"`
				Object struct {
					Kind     string            `json:"kind"`
					Metadata metav1.ObjectMeta `json:"metadata"`
					Spec     struct {
						NodeName string `json:"nodeName"`
					} `json:"spec"`
					Status struct {
						Phase string `json:"phase"`
					} `json:"status"`
				} `json:"object"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("undecodable watch line %q: %v", sc.Text(), err)
				return
			}
			ws.events <- rawEvent{Type: ev.Type, Name: ev.Object.Metadata.Name, RV: ev.Object.Metadata.ResourceVersion,
				Kind: ev.Object.Kind, Phase: ev.Object.Status.Phase, Node: ev.Object.Spec.NodeName, Annots: ev.Object.Metadata.Annotations}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return ws
}

// next returns the next event that is not a periodic bookmark.
func (ws *watchStream) next() rawEvent {
	ws.t.Helper()
	for {
		select {
		case ev, ok := <-ws.events:
			if !ok {
				ws.t.Fatalf("watch ended while an event was expected")
			}
			if ev.Type == "BOOKMARK" && ev.Annots[InitialEventsEndAnnotation] == "" {
				continue
			}
			return ev
		case <-time.After(10 * time.Second):
			ws.t.Fatalf("no watch event within 10s")
		}
	}
}

// expect reads len(want) events and compares type and name.
func (ws *watchStream) expect(want ...string) {
	ws.t.Helper()
	var got []string
	for range want {
		ev := ws.next()
		got = append(got, ev.Type+" "+ev.Name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		ws.t.Errorf("events (-want +got):\n%s", diff)
	}
}

// quiet checks no event (other than bookmarks) arrives for a short while.
func (ws *watchStream) quiet() {
	ws.t.Helper()
	deadline := time.After(200 * time.Millisecond)
	for {
		select {
		case ev, ok := <-ws.events:
			if !ok {
				return
			}
			if ev.Type != "BOOKMARK" {
				ws.t.Errorf("unexpected event %s %s", ev.Type, ev.Name)
			}
		case <-deadline:
			return
		}
	}
}

// TestWatchFromResourceVersion checks a plain watch: events after the given
// resourceVersion, in order, DELETED carrying the deletion's version.
func TestWatchFromResourceVersion(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin)
	a := e.seedPod(makePod("a").obj())
	ws := e.openWatch(t, "/api/v1/namespaces/default/pods?watch=true&resourceVersion="+a.ResourceVersion, IdentityWorkload)
	e.seedPod(makePod("b").obj())
	other := makePod("c").obj()
	other.Namespace = "other"
	e.seedPod(other) // another namespace: not seen
	if _, err := c.CoreV1().Pods("default").Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"1"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ws.expect("ADDED b", "MODIFIED a")
	del := ws.next()
	if del.Type != "DELETED" || del.Name != "a" || del.Kind != "Pod" {
		t.Fatalf("got %+v, want DELETED a", del)
	}
	if rv, _ := strconv.ParseUint(del.RV, 10, 64); rv != e.storeRevision() {
		t.Errorf("DELETED resourceVersion %s, want the deletion's %d", del.RV, e.storeRevision())
	}
}

// TestWatchSelectorTransitions checks that objects entering and leaving a
// filtered watch arrive as ADDED and DELETED.
func TestWatchSelectorTransitions(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	e.seedPod(makePod("early").label("app", "x").obj())
	e.seedPod(makePod("plain").obj())
	rv := strconv.FormatUint(e.storeRevision(), 10)
	labels := e.openWatch(t, "/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dx&resourceVersion="+rv, IdentityWorkload)
	node := e.openWatch(t, "/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dnode-1&resourceVersion="+rv, KubeletIdentity("node-1"))

	label := func(name, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, value)
		if _, err := admin.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("plain", "x")  // enters the label selection
	label("early", "y")  // leaves it (was selected at the start)
	label("plain", "x2") // leaves it
	label("early", "x")  // enters again
	if err := admin.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Target: corev1.ObjectReference{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels.expect("ADDED plain", "DELETED early", "DELETED plain", "ADDED early")
	labels.quiet()
	node.expect("ADDED plain")
	if err := admin.CoreV1().Pods("default").Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	node.expect("MODIFIED plain")
	node.quiet()
}

// TestWatchList checks the watch-list protocol client-go uses by default:
// ADDED for every current object, one BOOKMARK marking the end of the
// initial events at the list's resourceVersion, then live events.
func TestWatchList(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("a").label("app", "x").obj())
	e.seedPod(makePod("b").obj())
	e.seedPod(makePod("c").label("app", "x").obj())
	rev := e.storeRevision()
	ws := e.openWatch(t, "/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=app%3Dx", IdentityWorkload)
	ws.expect("ADDED a", "ADDED c")
	end := ws.next()
	if end.Type != "BOOKMARK" || end.RV != strconv.FormatUint(rev, 10) || end.Annots[InitialEventsEndAnnotation] != "true" || end.Kind != "Pod" {
		t.Errorf("end of initial events = %+v, want a Pod BOOKMARK at %d with the annotation", end, rev)
	}
	e.seedPod(makePod("d").label("app", "x").obj())
	ws.expect("ADDED d")
}

// TestWatchBookmarksAndTimeout checks periodic bookmarks and that
// timeoutSeconds ends the stream cleanly.
func TestWatchBookmarksAndTimeout(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BookmarkInterval = 50 * time.Millisecond })
	pod := e.seedPod(makePod("a").obj())
	start := time.Now()
	ws := e.openWatch(t, "/api/v1/namespaces/default/pods?watch=true&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion="+pod.ResourceVersion, IdentityWorkload)
	bookmarks := 0
	for ev := range ws.events {
		if ev.Type != "BOOKMARK" || ev.RV != pod.ResourceVersion {
			t.Errorf("event %+v, want bookmarks at %s", ev, pod.ResourceVersion)
		}
		bookmarks++
	}
	if elapsed := time.Since(start); elapsed < 900*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("watch with timeoutSeconds=1 ended after %v", elapsed)
	}
	if bookmarks < 3 {
		t.Errorf("%d bookmarks in 1 s at a 50 ms interval", bookmarks)
	}
}

// TestWatchTooOld checks the 410 for a resourceVersion older than the store
// remembers.
func TestWatchTooOld(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 1, raftstore.WithConfig(func(c *raftstore.Config) { c.WatchWindow = 3 }))
	e := newTestEnvOn(t, cluster.Stores[0])
	first := e.seedPod(makePod("a").obj())
	for i := range 5 {
		e.seedPod(makePod(fmt.Sprintf("b%d", i)).obj())
	}
	st, got := readStatus(t, e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods?watch=true&resourceVersion="+first.ResourceVersion, IdentityWorkload, "", nil))
	if diff := cmp.Diff(statusAnswer{410, metav1.StatusReasonExpired}, got); diff != "" {
		t.Errorf("watch from a forgotten version (-want +got):\n%s\n%s", diff, st.Message)
	}
}

// TestCloseEndsWatches checks that Close ends open watches and refuses new
// requests with 503.
func TestCloseEndsWatches(t *testing.T) {
	e := newTestEnv(t)
	ws := e.openWatch(t, "/api/v1/pods?watch=true", IdentityWorkload)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws.done:
	case <-time.After(5 * time.Second):
		t.Fatal("watch still open 5s after Close")
	}
	resp := e.rawRequest(http.MethodGet, "/api/v1/pods", IdentityWorkload, "", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("request after Close: %d, want 503", resp.StatusCode)
	}
}

// TestWatchManyFilteredWatchers runs many filtered watches of the same pods
// at once, as 200 kubelets do, so that they share each event's decoding:
// each must still see exactly its own selection, with the transitions of
// TestWatchSelectorTransitions.
func TestWatchManyFilteredWatchers(t *testing.T) {
	const nodes = 6
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	rv := strconv.FormatUint(e.storeRevision(), 10)
	var byNode []*watchStream
	for i := range nodes {
		byNode = append(byNode, e.openWatch(t, fmt.Sprintf("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%%3Dnode-%d&resourceVersion=%s", i, rv), IdentityAdmin))
	}
	var byLabel []*watchStream
	for range 3 {
		byLabel = append(byLabel, e.openWatch(t, "/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dx&resourceVersion="+rv, IdentityWorkload))
	}
	all := e.openWatch(t, "/api/v1/namespaces/default/pods?watch=1&resourceVersion="+rv, IdentityWorkload)

	for i := range 2 * nodes {
		e.seedPod(makePod(fmt.Sprintf("p%d", i)).node(fmt.Sprintf("node-%d", i%nodes)).obj())
	}
	label := func(name, value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"app":%q}}}`, value)
		if _, err := admin.CoreV1().Pods("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	label("p0", "x") // p0 enters the label selection
	label("p1", "y")
	label("p0", "z") // and leaves it
	if err := admin.CoreV1().Pods("default").Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0)}); err != nil {
		t.Fatal(err)
	}

	for i, ws := range byNode {
		want := []string{fmt.Sprintf("ADDED p%d", i), fmt.Sprintf("ADDED p%d", i+nodes)}
		switch i {
		case 0:
			want = append(want, "MODIFIED p0", "MODIFIED p0")
		case 1:
			want = append(want, "MODIFIED p1", "DELETED p1")
		}
		ws.expect(want...)
		ws.quiet()
	}
	for _, ws := range byLabel {
		ws.expect("ADDED p0", "DELETED p0")
		ws.quiet()
	}
	var want []string
	for i := range 2 * nodes {
		want = append(want, fmt.Sprintf("ADDED p%d", i))
	}
	all.expect(append(want, "MODIFIED p0", "MODIFIED p1", "MODIFIED p0", "DELETED p1")...)
}

func ptrTo[T any](v T) *T { return &v }

// TestAttrCache checks the sharing behind filtered watches: one object state
// is decoded once, a state with the same key and resourceVersion but other
// bytes (another store) is decoded for itself, and forgotten entries are
// decoded again.
func TestAttrCache(t *testing.T) {
	reg, err := newRegistry(resourceTable)
	if err != nil {
		t.Fatal(err)
	}
	res := reg.byGVR[corev1.SchemeGroupVersion.WithResource("pods")]
	encode := func(pod *corev1.Pod) []byte {
		data, err := res.encodeForStore(pod)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	object := func(name, node string, rv uint64) raftstore.Object {
		return raftstore.Object{Key: raftstore.Key{Resource: "pods", Namespace: "default", Name: name}, RV: rv,
			Data: encode(makePod(name).node(node).label("app", name).obj())}
	}
	c := newAttrCache(1, 2)
	get := func(o raftstore.Object) *objectAttrs {
		t.Helper()
		a, err := c.attrs(res, o)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := object("a", "node-1", 10)
	first := get(a)
	if got := first.fields["spec.nodeName"]; got != "node-1" {
		t.Errorf("spec.nodeName = %q, want node-1", got)
	}
	if got := first.labels["app"]; got != "a" {
		t.Errorf("label app = %q, want a", got)
	}
	copied := a
	copied.Data = bytes.Clone(a.Data)
	if get(copied) != first {
		t.Errorf("the same state (equal bytes) was decoded again")
	}
	foreign := object("a", "node-2", 10) // same key and RV, other bytes
	if got := get(foreign).fields["spec.nodeName"]; got != "node-2" {
		t.Errorf("another store's state read as spec.nodeName %q, want node-2", got)
	}
	get(object("b", "node-1", 11))
	get(object("c", "node-1", 12)) // the cache holds 2: a is forgotten
	again := get(a)
	if again == first || again.fields["spec.nodeName"] != "node-1" {
		t.Errorf("forgotten entry: got %+v (same pointer %v), want a fresh node-1 decoding", again, again == first)
	}
}
