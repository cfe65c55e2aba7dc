package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/raftstore"
)

// TestIndexedWatchesMatchUnindexed runs one seeded sequence of pod writes
// (creates, bindings, label changes, deletions) against a store that indexes
// pods by spec.nodeName and one that does not, and checks that every
// node-filtered watch and list says exactly the same on both: from the start,
// and resumed from the middle (which exercises the objects that changed
// between a watch's starting point and its list). The index narrows what the
// store hands the server; it must never change what a client sees.
func TestIndexedWatchesMatchUnindexed(t *testing.T) {
	indexed := newTestEnvOn(t, raftstore.OpenTestCluster(t, 1, raftstore.WithConfig(func(c *raftstore.Config) {
		c.Indexes = StoreIndexes()
	})).Stores[0])
	plain := newTestEnvOn(t, raftstore.OpenTestCluster(t, 1).Stores[0])
	envs := []*testEnv{indexed, plain}
	nodes := []string{"", "node-0", "node-1", "node-2"}
	selector := func(node string) string { return "fieldSelector=spec.nodeName%3D" + node }

	type stream struct{ ws [2]*watchStream }
	var streams []stream
	open := func(rvs [2]string) {
		for _, n := range nodes {
			var s stream
			for i, e := range envs {
				s.ws[i] = e.openWatch(t, "/api/v1/pods?watch=1&"+selector(n)+"&resourceVersion="+rvs[i], IdentityAdmin)
			}
			streams = append(streams, s)
		}
	}
	revs := func() [2]string {
		return [2]string{strconv.FormatUint(indexed.storeRevision(), 10), strconv.FormatUint(plain.storeRevision(), 10)}
	}
	start := revs()
	open(start)

	rnd := rand.New(rand.NewPCG(7, 11))
	type podState struct {
		exists bool
		node   string
	}
	pods := make([]podState, 8)
	apply := func(op func(e *testEnv) error) {
		t.Helper()
		for _, e := range envs {
			if err := op(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mid [2]string
	for step := range 120 {
		if step == 60 {
			mid = revs()
		}
		i := rnd.IntN(len(pods))
		name := fmt.Sprint("p", i)
		p := &pods[i]
		switch {
		case !p.exists:
			node := ""
			if rnd.IntN(3) == 0 {
				node = nodes[1+rnd.IntN(3)]
			}
			apply(func(e *testEnv) error {
				_, err := e.client(IdentityAdmin).CoreV1().Pods("default").Create(testCtx(t), makePod(name).node(node).label("v", "0").obj(), metav1.CreateOptions{})
				return err
			})
			*p = podState{exists: true, node: node}
		case p.node == "" && rnd.IntN(2) == 0:
			node := nodes[1+rnd.IntN(3)]
			apply(func(e *testEnv) error {
				return e.client(IdentityAdmin).CoreV1().Pods("default").Bind(testCtx(t), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
					Target: corev1.ObjectReference{Name: node}}, metav1.CreateOptions{})
			})
			p.node = node
		case rnd.IntN(3) > 0:
			patch := fmt.Sprintf(`{"metadata":{"labels":{"v":"%d"}}}`, step)
			apply(func(e *testEnv) error {
				_, err := e.client(IdentityAdmin).CoreV1().Pods("default").Patch(testCtx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				return err
			})
		default:
			zero := int64(0)
			apply(func(e *testEnv) error {
				return e.client(IdentityAdmin).CoreV1().Pods("default").Delete(testCtx(t), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			})
			p.exists = false
		}
	}
	// Resumed from the middle, after everything was written.
	open(mid)
	// One last pod on each node ends every stream.
	for _, n := range nodes {
		apply(func(e *testEnv) error {
			_, err := e.client(IdentityAdmin).CoreV1().Pods("default").Create(testCtx(t), makePod("end-x"+n).node(n).obj(), metav1.CreateOptions{})
			return err
		})
	}
	// The truth: every pod event in order, from an unfiltered watch.
	truth := indexed.openWatch(t, "/api/v1/pods?watch=1&resourceVersion="+start[0], IdentityAdmin)
	var all []rawEvent
	for ends := 0; ends < len(nodes); {
		ev := truth.next()
		all = append(all, ev)
		if strings.HasPrefix(ev.Name, "end-") {
			ends++
		}
	}
	// ideal is what a watch of node from rv gets, as kube-apiserver sends
	// it: a change into the selection is ADDED, out of it DELETED.
	ideal := func(node string, rv uint64) []string {
		type state struct{ exists, selected bool }
		pods := map[string]state{}
		var out []string
		for _, ev := range all {
			before := pods[ev.Name]
			now := ev.Type != "DELETED" && ev.Node == node
			pods[ev.Name] = state{exists: ev.Type != "DELETED", selected: now}
			if r, _ := strconv.ParseUint(ev.RV, 10, 64); r <= rv || strings.HasPrefix(ev.Name, "end-") {
				continue
			}
			switch {
			case ev.Type == "DELETED" && before.selected:
				out = append(out, "DELETED "+ev.Name)
			case ev.Type == "DELETED":
			case now && before.selected:
				out = append(out, "MODIFIED "+ev.Name)
			case now:
				out = append(out, "ADDED "+ev.Name)
			case before.selected:
				out = append(out, "DELETED "+ev.Name)
			}
		}
		return out
	}
	startRV, _ := strconv.ParseUint(start[0], 10, 64)
	midRV, _ := strconv.ParseUint(mid[0], 10, 64)
	total := 0
	for k, s := range streams {
		node := nodes[k%len(nodes)]
		from := startRV
		if k >= len(nodes) {
			from = midRV
		}
		want := ideal(node, from)
		var got [2][]string
		for i, ws := range s.ws {
			for {
				ev := ws.next()
				if strings.HasPrefix(ev.Name, "end-") {
					break
				}
				got[i] = append(got[i], ev.Type+" "+ev.Name)
			}
		}
		// The indexed store knows, for every event, whether the object
		// had the watch's node before: its streams are exactly ideal.
		if diff := cmp.Diff(want, got[0]); diff != "" {
			t.Errorf("watch %d (%s from %d) on the indexed store (-ideal +got):\n%s", k, selector(node), from, diff)
		}
		// Without the index, an object changed between a resumed watch's
		// start and its list is in an unknown state: its entry may come as
		// MODIFIED rather than ADDED, and it may get a DELETED it did not
		// need. Nothing else may differ.
		if !sameUpToUnknown(want, got[1]) {
			t.Errorf("watch %d (%s from %d) on the unindexed store:\nideal %q\ngot   %q", k, selector(node), from, want, got[1])
		}
		total += len(want)
	}
	if total < 100 {
		t.Errorf("the watches saw only %d events between them: the sequence exercised too little", total)
	}

	for _, n := range nodes {
		var got [2][]string
		for i, e := range envs {
			list, err := e.client(IdentityAdmin).CoreV1().Pods("").List(testCtx(t), metav1.ListOptions{FieldSelector: "spec.nodeName=" + n})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range list.Items {
				if p.Spec.NodeName != n {
					t.Errorf("list with spec.nodeName=%s returned %s on %q", n, p.Name, p.Spec.NodeName)
				}
				got[i] = append(got[i], p.Name)
			}
		}
		if diff := cmp.Diff(got[1], got[0]); diff != "" {
			t.Errorf("list %s: indexed store differs (-unindexed +indexed):\n%s", selector(n), diff)
		}
	}
}

// sameUpToUnknown reports whether got is want except for the liberties a
// watch may take with an object in an unknown state: ADDED sent as MODIFIED,
// and DELETED events for objects the client did not hold.
func sameUpToUnknown(want, got []string) bool {
	i := 0
	for _, g := range got {
		switch {
		case i < len(want) && g == want[i]:
			i++
		case i < len(want) && strings.HasPrefix(want[i], "ADDED ") && g == "MODIFIED "+strings.TrimPrefix(want[i], "ADDED "):
			i++
		case strings.HasPrefix(g, "DELETED "):
		default:
			return false
		}
	}
	return i == len(want)
}

// podNodeNameCases are pods whose spec.nodeName a scan could misread.
var podNodeNameCases = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c"}],"nodeName":"n1"}}`,
	`{"metadata":{"annotations":{"nodeName":"fake"},"labels":{"spec":"x"}},"spec":{"containers":[]}}`,
	`{"metadata":{"annotations":{"nodeName":"fake"}},"spec":{"nodeName":"real"}}`,
	`{"metadata":{"annotations":{"a":"\"nodeName\":\"fake\""}},"spec":{}}`,
	`{"metadata":{"name":"a"},"spec":{"affinity":{"nodeAffinity":{"x":{"nodeName":"deep"}}},"nodeName":"n2"}}`,
	`{"metadata":{"name":"a"},"spec":{"nodeName":"n\u0031"}}`,
	`{"metadata":{"name":"a"},"spec":{"nodeName":null}}`,
	`{"metadata":{"name":"a"},"spec" : { "nodeName" : "spaced" } }`,
	`{"spec":{"nodeName":"early"},"status":{"nominatedNodeName":"other"}}`,
	`{"status":{"nodeName":"no"},"spec":{"containers":[{"nodeName":"no"}]}}`,
	`{"spec":["nodeName","x"]}`,
}

// TestPodNodeNameMatchesDecoding: the scan gives what decoding gives.
func TestPodNodeNameMatchesDecoding(t *testing.T) {
	for _, c := range podNodeNameCases {
		if got, want := podNodeName([]byte(c)), decodeNodeName([]byte(c)); got != want {
			t.Errorf("podNodeName(%s) = %q, decoding gives %q", c, got, want)
		}
	}
	if got := podNodeName([]byte(podNodeNameCases[0])); got != "n1" {
		t.Errorf("podNodeName of a bound pod = %q, want n1", got)
	}
}

func FuzzPodNodeName(f *testing.F) {
	for _, c := range podNodeNameCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || bytes.Count(data, []byte("nodeName")) > 1 || bytes.Count(data, []byte("spec")) > 1 {
			// Stored objects are the server's own encodings: JSON, and
			// no key twice in one object.
			return
		}
		if got, want := podNodeName(data), decodeNodeName(data); got != want {
			t.Errorf("podNodeName(%q) = %q, decoding gives %q", data, got, want)
		}
	})
}

// BenchmarkPodNodeName reads spec.nodeName of a stored pod of about 2 KiB:
// by the scan, and by decoding.
func BenchmarkPodNodeName(b *testing.B) {
	pod := makePod("bench").node("node-17").label("app", "bench").grace(30).obj()
	pod.Annotations = map[string]string{"podsafe.io/script.c": "run=5s exit=0 prestop=2s", "note": strings.Repeat("x", 1200)}
	data, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		f    func([]byte) string
	}{{"scan", podNodeName}, {"decode", decodeNodeName}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bc.f(data) != "node-17" {
					b.Fatal("wrong node")
				}
			}
		})
	}
}
