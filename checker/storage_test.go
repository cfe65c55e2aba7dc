package checker

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// The old pet's delayed write lands after its replacement took the volume
// over: two pods used the RWO volume at once.
func TestStorageInterleaved(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(3, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9)).
		led(4, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(5, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9))
	res := mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Illegal)
	if len(res.Evidence) != 1 {
		t.Fatalf("evidence %+v, want one volume", res.Evidence)
	}
	ev := res.Evidence[0]
	if ev.Key != "v0" {
		t.Errorf("evidence key %q", ev.Key)
	}
	if diff := cmp.Diff([]string{"a:write", "b:write", "a:write"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if ev.Ledger[0].T != secs(2) || ev.Ledger[2].T != secs(4) {
		t.Errorf("evidence shows writes at %d and %d, want A's last write before B and A's write after", ev.Ledger[0].T, ev.Ledger[2].T)
	}
	mustMention(t, "description", ev.Description, "token 5", "token 9", "ledger #1", "ledger #2", "ledger #3")
	mustMention(t, "summary", res.Summary, "PS-15", "v0")
}

func TestStorageOk(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWrite, "n1", "web-1", "c", vol("v1", 6)). // another volume in between
		led(3, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(4, history.LedgerWriteRefused, "n1", "web-0", "a", vol("v0", 5)). // fenced: refused, not applied
		led(5, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9)).
		led(6, history.LedgerWriteRefused, "n1", "web-0", "a", vol("v0", 5)).
		led(7, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9)).
		led(8, history.LedgerWrite, "n2", "web-1", "d", vol("v1", 10))
	res := mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Ok)
	if res.Stats.Ops != 8 || res.Stats.Checked != 6 || res.Stats.Keys != 2 {
		t.Errorf("stats %+v", res.Stats)
	}
	mustMention(t, "summary", res.Summary, "1 fenced node")
}

// A node the storage refused as fenced writes again: reported, with the
// admin's write to the node that may have been an unfence.
func TestStorageFenceBroken(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWriteRefused, "n1", "web-0", "a", vol("v0", 5)).
		call(3, identityAdmin, "get", "nodes", "", "n1").
		call(4, identityAdmin, "update", "nodes", "", "n1", sub("status")).
		led(5, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5))
	res := mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "n1" {
		t.Errorf("evidence key %q", ev.Key)
	}
	if diff := cmp.Diff([]string{"a:write-refused", "a:write"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if len(ev.API) != 1 || ev.API[0].Verb != "update" {
		t.Errorf("evidence calls %+v, want the admin's status update", ev.API)
	}
	mustMention(t, "description", ev.Description, "no unfence", "1 admin write")
	mustMention(t, "summary", res.Summary, "PS-14", "unfenced")

	// Without any admin write in between, the description says so.
	b = &hb{}
	b.led(1, history.LedgerWriteRefused, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5))
	res = mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "no admin write")
}

// Writes without a UID are told apart by pod and node.
func TestStorageWithoutUIDs(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerWrite, "n1", "web-0", "", vol("v0", 5)).
		led(2, history.LedgerWrite, "n2", "web-0", "", vol("v0", 9)).
		led(3, history.LedgerWrite, "n1", "web-0", "", vol("v0", 5))
	mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Illegal)
}

func TestStorageEmpty(t *testing.T) {
	mustVerdict(t, CheckStorage(bg, &history.History{}, Options{}), Unknown)
	b := (&hb{}).led(1, history.LedgerStart, "n1", "web-0", "a")
	mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Unknown)
}

// tokens says the run's storage compares fencing tokens, as the policy
// line of a history does.
func (b *hb) tokens() *hb {
	b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: "cluster policies", Attrs: map[string]string{LogStorageFencingTokens: "true"}})
	return b
}

// A storage that compares fencing tokens accepted a superseded
// attachment's write after its successor's: PS-15, with the two writes as
// evidence. On a storage that does not compare, the same ledger is the
// late write of a stopped container (expected), and the summary counts the
// write such a storage would have refused.
func TestStorageStaleTokenAccepted(t *testing.T) {
	ledger := func(b *hb) *hb {
		return b.led(1, history.LedgerStart, "n1", "web-0", "a").
			led(2, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
			led(3, history.LedgerExit, "n1", "web-0", "a").
			led(4, history.LedgerStart, "n2", "web-0", "b").
			led(5, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9)).
			led(6, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5))
	}
	res := mustVerdict(t, CheckStorage(bg, ledger((&hb{}).tokens()).history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if diff := cmp.Diff([]string{"b:write", "a:write"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	mustMention(t, "description", ev.Description, "token 9", "lower token 5", "refuses")
	mustMention(t, "summary", res.Summary, "compares fencing tokens", "PS-15", "v0")
	for _, e := range res.Evidence {
		if e.Expected {
			t.Errorf("a stale write on a storage that compares is not expected: %s", e.Description)
		}
	}

	res = mustVerdict(t, CheckStorage(bg, ledger(&hb{}).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "arrived late", "1 accepted write carried a token below", "does not compare")
}

// A storage that compares refused the stale write: Ok, and the summary
// counts the refusal; a write-stale entry alone says the storage compares.
// The node is not fenced: its later writes with a fresh token are no PS-14
// breach.
func TestStorageStaleTokenRefused(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 9)).
		led(3, history.LedgerWriteStale, "n1", "web-0", "a", vol("v0", 5)).
		led(4, history.LedgerWrite, "n1", "web-0", "c", vol("v0", 12))
	res := mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "compares fencing tokens and refused 1 stale write")
	if res.Stats.Ops != 4 || res.Stats.Checked != 3 {
		t.Errorf("stats %+v", res.Stats)
	}
	// Equal tokens are one attachment (a pod replaced on the node its
	// volume stayed attached to): not stale.
	b = (&hb{}).tokens()
	b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 5)).
		led(2, history.LedgerWrite, "n1", "web-0", "b", vol("v0", 5))
	mustVerdict(t, CheckStorage(bg, b.history(), Options{}), Ok)
}
