package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// refusalHistory is an embedded run in which the workload deletes web-0
// gracefully twice (30 s, then a shorter 10 s), a kubelet of another node
// is refused a deletion, the workload is refused a force deletion and the
// ReplicaSet controller's deletion meets a conflict; mods change it.
func refusalHistory(mods ...func(*hb)) *history.History {
	b := &hb{}
	b.deleted(1, "workload", "a", 30)
	b.call(2, "workload", "delete", "pods", "default", "web-0", askGrace(10))
	b.call(3, "kubelet:n2", "delete", "pods", "default", "web-0", askGrace(5), outcome(history.StatusFail), code(403))
	b.call(4, "workload", "delete", "pods", "default", "web-1", askGrace(0), outcome(history.StatusFail), code(403))
	b.call(5, "replicaset-controller", "delete", "pods", "default", "web-2", outcome(history.StatusFail), code(409))
	for _, m := range mods {
		m(b)
	}
	h := b.history()
	h.Meta.Extra = map[string]string{history.ExtraTarget: history.TargetEmbedded}
	return h
}

func TestRefusedGracefulOk(t *testing.T) {
	res := mustVerdict(t, CheckAuthority(bg, refusalHistory(), Options{}), Ok)
	if !strings.Contains(res.Summary, "none of 3 graceful deletions was refused") {
		t.Errorf("summary %q", res.Summary)
	}
	if !slices.Contains(res.Guarantees, "PS-3") || !slices.Contains(res.Guarantees, "LC-11") {
		t.Errorf("guarantees %v, want PS-3 and LC-11 judged", res.Guarantees)
	}
}

func TestRefusedGracefulIllegal(t *testing.T) {
	// The second, shorter deletion refused as if it were a force deletion:
	// what the API server does when it computes the grace as 0.
	h := refusalHistory(func(b *hb) {
		b.call(6, "workload", "delete", "pods", "default", "web-0", askGrace(5), outcome(history.StatusFail), code(403),
			func(c *history.APICall) { c.Error = "PS-FORCE: workload may not force delete pod default/web-0" })
		b.call(7, "pet-controller", "delete", "pods", "default", "db-0", outcome(history.StatusFail), code(403))
	})
	res := mustVerdict(t, CheckAuthority(bg, h, Options{}), Illegal)
	if !strings.Contains(res.Summary, "2 graceful deletions refused, first workload delete pods default/web-0 grace 5") {
		t.Errorf("summary %q", res.Summary)
	}
	if len(res.Evidence) != 2 || res.Evidence[0].Key != "default/web-0" || !strings.Contains(res.Evidence[0].Description, "PS-FORCE") {
		t.Errorf("evidence %+v", res.Evidence)
	}
	for _, id := range refusalGuarantees {
		if !slices.Contains(res.Guarantees, id) {
			t.Errorf("guarantees %v lack %s", res.Guarantees, id)
		}
	}
}

func TestRefusedGracefulNotJudgedOnKube(t *testing.T) {
	h := refusalHistory(func(b *hb) {
		b.call(6, "workload", "delete", "pods", "default", "web-0", askGrace(5), outcome(history.StatusFail), code(403))
	})
	h.Meta.Extra[history.ExtraTarget] = "kube"
	res := mustVerdict(t, CheckAuthority(bg, h, Options{}), Ok)
	if !strings.Contains(res.Summary, "refusals of graceful deletions not judged: not the embedded target") || slices.Contains(res.Guarantees, "PS-3") {
		t.Errorf("%v: %s", res.Guarantees, res.Summary)
	}
}
