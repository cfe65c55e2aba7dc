package specs

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
)

// TestStoreEventsStartFromAListWhenTheWindowMovedOn: when the cluster's
// start wrote more events than the watch window holds before the record
// began (5,000 kubelets do), the record of nodes starts with every node as
// listed, each an ADDED line at its own resourceVersion, with a "store
// events listed" line instead of "store events lost", and goes on with the
// changes after the list.
func TestStoreEventsStartFromAListWhenTheWindowMovedOn(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 3, 1), WatchWindow: 4})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wg := recordStoreEvents(ctx, c, rec, []storeSource{{resource: "nodes"}})

	// A change after the record began is recorded after the listed state.
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var labelled uint64
	for deadline := time.Now().Add(time.Minute); labelled == 0; {
		if time.Now().After(deadline) {
			t.Fatal("could not label node-0 within a minute")
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err == nil {
			n.Labels["podsafe.io/recorded"] = "yes"
			if n, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
				labelled, _ = strconv.ParseUint(n.ResourceVersion, 10, 64)
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Wait until the record has the label change.
	for deadline := time.Now().Add(time.Minute); ; {
		h, err := history.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(h.Store, func(e history.StoreEvent) bool { return e.RV == strconv.FormatUint(labelled, 10) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record never reached the label change at %d", labelled)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	var listed *history.LogEntry
	for i, l := range h.Logs {
		switch l.Msg {
		case history.LogStoreEventsLost:
			t.Errorf("the record says store events were lost: %v", l.Attrs)
		case history.LogStoreEventsListed:
			listed = &h.Logs[i]
		}
	}
	if listed == nil {
		t.Fatalf("no %q line: the window of 4 events should not reach back to the cluster's start", history.LogStoreEventsListed)
	}
	if listed.Attrs["resource"] != "nodes" || listed.Attrs["objects"] != "3" {
		t.Errorf("listed line %v, want 3 nodes", listed.Attrs)
	}
	listRV, _ := strconv.ParseUint(listed.Attrs["rv"], 10, 64)
	var added []string
	var prev uint64
	for _, e := range h.Store {
		rv, _ := strconv.ParseUint(e.RV, 10, 64)
		if rv < prev {
			t.Errorf("store lines out of order: %d after %d", rv, prev)
		}
		prev = rv
		if rv <= listRV {
			if e.Type != history.StoreEventType("ADDED") {
				t.Errorf("listed node %s at %d is %s, want ADDED", e.Name, rv, e.Type)
			}
			added = append(added, e.Name)
		}
	}
	slices.Sort(added)
	if !slices.Equal(added, []string{"node-0", "node-1", "node-2"}) {
		t.Errorf("listed nodes %v, want node-0..2", added)
	}
	if labelled <= listRV {
		t.Errorf("the label change at %d is not after the list at %d", labelled, listRV)
	}
}
