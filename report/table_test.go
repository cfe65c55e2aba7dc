package report

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/checker"
)

func TestCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range Catalogue() {
		if seen[g.ID] {
			t.Errorf("%s listed twice", g.ID)
		}
		seen[g.ID] = true
		if g.Title == "" || Families[g.Family] == "" || !strings.HasPrefix(g.ID, g.Family+"-") {
			t.Errorf("%+v: want a title and a known family that prefixes the ID", g)
		}
	}
	// Every ID the guarantees document defines, and the store's.
	for _, id := range []string{"LC-1", "LC-14", "PS-1", "PS-17", "PS-T", "GP-1", "GP-7", "GP-R", "PR-1", "PR-15", "TS-1", "TS-12", "TS-E", "STORE-LIN",
		"STORE-WATCH-ORDER", "STORE-WATCH-VALUE", "STORE-READ-AFTER-WATCH", "STORE-LIST"} {
		if !seen[id] {
			t.Errorf("%s missing from the catalogue", id)
		}
	}
	if n := len(seen); n != 14+18+8+15+13+5 {
		t.Errorf("catalogue has %d IDs, want %d", n, 14+18+8+15+13+5)
	}
	// Every guarantee a checker names is in the catalogue.
	for _, c := range checker.Catalog() {
		for _, id := range c.Guarantees {
			if !seen[id] {
				t.Errorf("checker %s names %s, which the catalogue lacks", c.Name, id)
			}
		}
	}
}

func TestGuaranteeTable(t *testing.T) {
	r := &Results{Checks: []checker.Result{
		{Checker: "a", Verdict: checker.Ok, Guarantees: []string{"PS-1", "PS-4", "PS-4"}, Summary: "a ok"},
		{Checker: "b", Verdict: checker.Illegal, Guarantees: []string{"PS-1", "XX-9"}, Summary: "b broke"},
		{Checker: "c", Verdict: checker.Unknown, Guarantees: []string{"PS-4", "PS-1", "GP-R"}, Summary: "c timed out"},
		{Checker: "d", Verdict: "", Guarantees: []string{"TS-2"}, Summary: "d said nothing"},
		{Checker: "e", Verdict: checker.Ok, Guarantees: []string{"LC-3"}, Summary: "e ok"},
	}}
	rows := GuaranteeTable(r)
	if len(rows) != len(catalogue)+1 {
		t.Fatalf("%d rows, want %d (the catalogue and the unknown XX-9)", len(rows), len(catalogue)+1)
	}
	type row struct {
		Verdict   checker.Verdict
		Text      string
		Checkers  []string
		Summaries []string
		Known     bool
	}
	got := map[string]row{}
	for _, g := range rows {
		got[g.ID] = row{g.Verdict, g.VerdictText(), g.Checkers, g.Summaries, g.Known}
	}
	want := map[string]row{
		// Illegal wins over Unknown and Ok.
		"PS-1": {checker.Illegal, "Illegal", []string{"a", "b", "c"}, []string{"b broke"}, true},
		// Unknown wins over Ok; a check listing an ID twice counts once.
		"PS-4": {checker.Unknown, "Unknown", []string{"a", "c"}, []string{"c timed out"}, true},
		"GP-R": {checker.Unknown, "Unknown", []string{"c"}, []string{"c timed out"}, true},
		// An empty verdict is not a pass.
		"TS-2": {checker.Unknown, "Unknown", []string{"d"}, []string{"d said nothing"}, true},
		"LC-3": {checker.Ok, "Ok", []string{"e"}, []string{"e ok"}, true},
		"XX-9": {checker.Illegal, "Illegal", []string{"b"}, []string{"b broke"}, false},
		"PR-1": {"", NotJudged, nil, nil, true},
	}
	for id, w := range want {
		if diff := cmp.Diff(w, got[id]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
	if last := rows[len(rows)-1]; last.ID != "XX-9" || last.Family != "XX" {
		t.Errorf("last row %s (family %s), want the uncatalogued XX-9 last", last.ID, last.Family)
	}
	if rows[0].ID != "LC-1" {
		t.Errorf("first row %s, want LC-1 (catalogue order)", rows[0].ID)
	}
	if n := len(JudgedRows(rows)); n != 6 {
		t.Errorf("%d judged rows, want 6", n)
	}
	// No checks: nothing judged.
	for _, g := range GuaranteeTable(&Results{}) {
		if g.Judged || g.VerdictText() != NotJudged {
			t.Errorf("%s judged by a run without checks", g.ID)
		}
	}
}

func TestSortIDs(t *testing.T) {
	ids := []string{"ZZ-2", "STORE-LIN", "XX-10", "PS-T", "XX-9", "LC-2", "PS-10", "PS-2"}
	sortIDs(ids)
	want := []string{"LC-2", "PS-2", "PS-10", "PS-T", "STORE-LIN", "XX-9", "XX-10", "ZZ-2"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
