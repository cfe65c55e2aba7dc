package checker

import (
	"slices"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// onNode2 is pod web-0 (UID a) as the store recorded it bound to n2.
func onNode2() *hb {
	return (&hb{}).
		pod(0.5, added, 1, poObj("a")).
		pod(0.6, modified, 2, poObj("a", poBound("n2")))
}

func TestAuthorityKubeletDeletesOnlyItsOwnNodesPods(t *testing.T) {
	// kubelet:n1 deletes gracefully a pod bound to n2: refused by the node
	// restriction, so a run that shows it ran without it.
	res := mustVerdict(t, CheckAuthority(bg, onNode2().deleted(2, "kubelet:n1", "a", 30).history(), Options{}), Illegal)
	mustMention(t, "summary", res.Summary, "kubelet:n1 deleted pod default/web-0", "bound to node n2", "PS-1")
	if !slices.Equal(res.Guarantees, []string{"PS-1"}) {
		t.Errorf("guarantees %v, want only PS-1 (no force deletion was judged illegal)", res.Guarantees)
	}
	if len(res.Evidence) != 1 || len(res.Evidence[0].API) != 1 || res.Evidence[0].At == 0 {
		t.Errorf("evidence %+v, want the call and its time", res.Evidence)
	}

	// An eviction answers a Status, without the pod's UID: the pod's node
	// is its last version before the call.
	evict := onNode2().call(2, "kubelet:n1", "create", "pods", "default", "web-0", func(c *history.APICall) { c.Subresource = "eviction" })
	res = mustVerdict(t, CheckAuthority(bg, evict.history(), Options{}), Illegal)
	mustMention(t, "summary", res.Summary, "kubelet:n1 evicted pod default/web-0")

	// Its own kubelet may.
	res = mustVerdict(t, CheckAuthority(bg, onNode2().deleted(2, "kubelet:n2", "a", 30).history(), Options{}), Ok)
	if !slices.Contains(res.Guarantees, "PS-1") {
		t.Errorf("guarantees %v, want PS-1 judged", res.Guarantees)
	}
	mustMention(t, "summary", res.Summary, "of a pod bound to its own node")

	// Without the store's record of the pod nothing is judged, and PS-1
	// is not listed.
	res = mustVerdict(t, CheckAuthority(bg, (&hb{}).deleted(2, "kubelet:n1", "a", 30).history(), Options{}), Ok)
	if slices.Contains(res.Guarantees, "PS-1") {
		t.Errorf("guarantees %v list PS-1 with nothing judged", res.Guarantees)
	}

	// A pod deleted before the call (by name, no UID in the answer) is
	// not judged: the call found nothing of that name.
	gone := onNode2().pod(1, removed, 3, poObj("a", poBound("n2"))).
		call(2, "kubelet:n1", "delete", "pods", "default", "web-0", askGrace(30))
	mustVerdict(t, CheckAuthority(bg, gone.history(), Options{}), Ok)

	// A failed call did nothing.
	failed := onNode2().deleted(2, "kubelet:n1", "a", 30)
	failed.h.API[len(failed.h.API)-1].Outcome = history.StatusFail
	mustVerdict(t, CheckAuthority(bg, failed.history(), Options{}), Ok)
}
