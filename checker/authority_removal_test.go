package checker

import (
	"fmt"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// embedded marks b's history a complete one of the embedded target, where
// every component's calls are recorded.
func (b *hb) embedded() *hb {
	b.h.Complete = true
	b.h.Meta.Extra = map[string]string{history.ExtraTarget: history.TargetEmbedded}
	return b
}

// storeRemoved records the store's DELETED event of web-0 (UID a) bound to
// n1, Running, with the deletion marks dgps (nil: none) and spec grace
// spec (nil: none).
func (b *hb) storeRemoved(t float64, dgps, spec *int64) *hb {
	meta := `"namespace":"default","name":"web-0","uid":"a"`
	if dgps != nil {
		meta += fmt.Sprintf(`,"deletionTimestamp":"2026-01-01T00:00:30Z","deletionGracePeriodSeconds":%d`, *dgps)
	}
	specJSON := `"nodeName":"n1"`
	if spec != nil {
		specJSON += fmt.Sprintf(`,"terminationGracePeriodSeconds":%d`, *spec)
	}
	obj := fmt.Sprintf(`{"metadata":{%s},"spec":{%s},"status":{"phase":"Running"}}`, meta, specJSON)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreDeleted, Resource: "pods", Namespace: "default", Name: "web-0",
		RV: "57", Object: []byte(obj), T: secs(t)})
	return b
}

func i64(v int64) *int64 { return &v }

// A graceful deletion, then a shorter graceful one: the store removing the
// running pod then, with no grace-0 deletion before, is the API server
// finishing a deletion its kubelet had not (PS-8).
func TestAuthorityGracefulRemoval(t *testing.T) {
	b := runningPod().deleted(5, "workload", "a", 30).deleted(8, "workload", "a", 10).storeRemoved(8.01, i64(30), nil).embedded()
	endPod(b)
	res := mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" || len(ev.API) != 2 {
		t.Errorf("evidence %+v, want the pod's two graceful deletions", ev)
	}
	mustMention(t, "description", ev.Description, "PS-8", "UID a", "node n1", "deletion grace 30 s", "rv 57", "2 deletions")
	if !containsAll(res.Guarantees, "PS-8", "LC-11") {
		t.Errorf("guarantees %v, want PS-8 and LC-11", res.Guarantees)
	}
}

func TestAuthorityRemovals(t *testing.T) {
	graceful := func() *hb { return runningPod().deleted(5, "workload", "a", 30) }
	tests := []struct {
		name    string
		b       *hb
		want    Verdict
		mention string
	}{
		{"the kubelet finishes with grace 0", graceful().
			led(6, term, "n1", "web-0", "a", grace(30)).led(7, exit, "n1", "web-0", "a").
			force(8, "kubelet:n1").storeRemoved(8.01, i64(30), nil).embedded(), Ok, "each of 1 removal of a bound pod was after a deletion asking for grace 0"},
		{"a grace-0 deletecollection of the namespace", endPod(graceful().
			call(8, identityAdmin, "deletecollection", "pods", "default", "", askGrace(0)).storeRemoved(8.01, i64(30), nil).embedded()), Ok, "each of 1 removal"},
		{"a grace-0 deletion of unknown outcome", endPod(graceful().
			force(8, identityAdmin, outcome(history.StatusUnknown)).storeRemoved(8.01, i64(30), nil).embedded()), Ok, "each of 1 removal"},
		{"a first deletion of a pod whose spec grace is 0", endPod(runningPod().
			call(5, "workload", "delete", "pods", "default", "web-0", uid("a")).storeRemoved(5.01, nil, i64(0)).embedded()), Ok, "1 deletion of pods"},
		{"a deletion marked with grace 0 (finalizers held it)", endPod(graceful().storeRemoved(9, i64(0), nil).embedded()), Ok, "1 deletion of pods"},
		{"removed with no deletion asked at all", endPod(runningPod().call(1, "workload", "delete", "pods", "default", "other").
			storeRemoved(9, nil, nil).embedded()), Illegal, "0 deletions of it before the removal"},
		{"a grace-0 deletion after the removal explains nothing", endPod(graceful().storeRemoved(8, i64(30), nil).
			force(9, identityAdmin).embedded()), Illegal, "PS-8"},
		{"the kube target is not judged", endPod(graceful().storeRemoved(8, i64(30), nil)), Ok, "not the embedded target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.b.history()
			if tt.name == "the kube target is not judged" {
				h.Complete = true
				h.Meta.Extra = map[string]string{history.ExtraTarget: "kube"}
			}
			res := mustVerdict(t, CheckAuthority(bg, h, Options{}), tt.want)
			mustMention(t, "summary", res.Summary, tt.mention)
		})
	}
	// A crashed run's history may have lost calls: not judged.
	b := endPod(runningPod().deleted(5, "workload", "a", 30).storeRemoved(8, i64(30), nil).embedded())
	b.h.Complete = false
	res := mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "no closing record")
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
