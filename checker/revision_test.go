package checker

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// revOp is an operation that completed OK over [invoke, ret] and returned
// resourceVersion rv.
func revOp(id uint64, f, key, rv string, invoke, ret int64) history.Op {
	return history.Op{ID: id, Process: int(id), Func: f, Key: key, RV: rv, Status: history.StatusOK, Invoke: invoke, Return: ret}
}

func TestCheckRevisions(t *testing.T) {
	unknown := revOp(9, FuncCreate, "k3", "", 15, 25)
	unknown.Status = history.StatusUnknown
	tests := []struct {
		name         string
		ops          []history.Op
		want         Verdict
		wantEvidence []uint64 // op IDs of the first evidence
	}{
		{name: "revisions rise", want: Ok, ops: []history.Op{
			revOp(1, FuncCreate, "k1", "5", 0, 10),
			revOp(2, FuncGet, "k1", "5", 20, 30),
			revOp(3, FuncCAS, "k1", "9", 40, 50),
			revOp(4, "list", "ns", "9", 60, 70),
			revOp(5, FuncCreate, "k2", "12", 80, 90),
		}},
		// A power failure lost the entries up to revision 9, and a write
		// after it reused revision 8: no read of k1 shows the loss.
		{name: "a write reuses a lost revision", want: Illegal, wantEvidence: []uint64{2, 3}, ops: []history.Op{
			revOp(1, FuncCreate, "k1", "5", 0, 10),
			revOp(2, FuncCAS, "k1", "9", 20, 30),
			revOp(3, FuncCreate, "k2", "8", 100, 110),
		}},
		{name: "a write at a revision already read", want: Illegal, wantEvidence: []uint64{1, 2}, ops: []history.Op{
			revOp(1, FuncGet, "k1", "7", 0, 10),
			revOp(2, FuncCAS, "k2", "7", 20, 30),
		}},
		{name: "a list below a read", want: Illegal, wantEvidence: []uint64{1, 2}, ops: []history.Op{
			revOp(1, FuncGet, "k1", "9", 0, 10),
			revOp(2, "list", "ns", "7", 20, 30),
		}},
		{name: "a list at the revision read", want: Ok, ops: []history.Op{
			revOp(1, FuncGet, "k1", "9", 0, 10),
			revOp(2, "list", "ns", "9", 20, 30),
		}},
		// Concurrent operations may be ordered either way.
		{name: "overlapping", want: Ok, ops: []history.Op{
			revOp(1, FuncCreate, "k1", "9", 0, 30),
			revOp(2, FuncCreate, "k2", "8", 10, 20),
			revOp(3, "list", "ns", "9", 40, 50),
		}},
		{name: "unknown and failed operations tell nothing", want: Unknown, ops: []history.Op{
			unknown,
			{ID: 10, Func: FuncCAS, Key: "k1", Status: history.StatusFail, Error: ErrorConflict, Invoke: 30, Return: 40},
			revOp(11, FuncCreate, "k2", "4", 50, 60),
		}},
		{name: "no operations", want: Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := CheckRevisions(context.Background(), tt.ops, Options{})
			if res.Verdict != tt.want {
				t.Fatalf("verdict %s (%s), want %s", res.Verdict, res.Summary, tt.want)
			}
			if diff := cmp.Diff([]string{GuaranteeStoreLin}, res.Guarantees); diff != "" {
				t.Errorf("guarantees (-want +got):\n%s", diff)
			}
			if tt.want != Illegal {
				if len(res.Evidence) != 0 {
					t.Errorf("evidence for a %s verdict: %+v", res.Verdict, res.Evidence)
				}
				return
			}
			if len(res.Evidence) == 0 {
				t.Fatal("an Illegal verdict without evidence")
			}
			var ids []uint64
			for _, op := range res.Evidence[0].Ops {
				ids = append(ids, op.ID)
			}
			if diff := cmp.Diff(tt.wantEvidence, ids); diff != "" {
				t.Errorf("evidence ops (-want +got):\n%s", diff)
			}
			if !strings.Contains(res.Evidence[0].Description, "went back") {
				t.Errorf("evidence %q does not say the revision went back", res.Evidence[0].Description)
			}
		})
	}
}

// Check runs the revision checker on register histories, and only there.
func TestRevisionCheckerInCheck(t *testing.T) {
	h := &history.History{Ops: []history.Op{
		revOp(1, FuncCAS, "k1", "9", 0, 10),
		revOp(2, FuncCreate, "k2", "3", 20, 30),
	}}
	var got *Result
	for _, r := range Check(context.Background(), h, Options{}) {
		if r.Checker == RevisionChecker {
			got = &r
		}
	}
	if got == nil || got.Verdict != Illegal {
		t.Fatalf("Check's %s result: %+v, want Illegal", RevisionChecker, got)
	}
	for _, r := range Check(context.Background(), &history.History{Ops: []history.Op{{ID: 1, Func: "scale", Status: history.StatusOK}}}, Options{}) {
		if r.Checker == RevisionChecker {
			t.Errorf("%s ran on a history without resourceVersions: %+v", RevisionChecker, r)
		}
	}
}
