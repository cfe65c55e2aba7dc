package checker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		in   []Verdict
		want Verdict
	}{
		{nil, Ok},
		{[]Verdict{Ok, Ok}, Ok},
		{[]Verdict{Ok, Unknown}, Unknown},
		{[]Verdict{Unknown, Illegal, Ok}, Illegal},
		{[]Verdict{Ok, "garbled"}, Unknown},
	}
	for _, tt := range tests {
		if got := MergeVerdicts(tt.in...); got != tt.want {
			t.Errorf("MergeVerdicts(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := Merge([]Result{{Verdict: Ok}, {Verdict: Unknown}}); got != Unknown {
		t.Errorf("Merge = %s, want Unknown", got)
	}
}

func TestCatalogNamesEveryChecker(t *testing.T) {
	h := &history.History{Ops: ops(t, "0 0 10 create x a -> ok")}
	var names []string
	for _, c := range Catalog() {
		names = append(names, c.Name)
		if c.Description == "" || len(c.Guarantees) == 0 {
			t.Errorf("catalog entry %+v lacks a description or guarantees", c)
		}
	}
	var ran []string
	for _, r := range Check(context.Background(), h, Options{}) {
		ran = append(ran, r.Checker)
	}
	if diff := cmp.Diff(names, ran); diff != "" {
		t.Errorf("checkers run vs catalog (-catalog +ran):\n%s", diff)
	}
}

func TestCheckWritesVisualization(t *testing.T) {
	dir := t.TempDir()
	h := &history.History{Ops: ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> a")}
	path := filepath.Join(dir, "linearizability.html")
	results := Check(context.Background(), h, Options{VisualizationPath: path})
	if len(results) != 1 || results[0].Verdict != Ok {
		t.Fatalf("results %+v, want one Ok", results)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no visualization: %v", err)
	}

	bad := filepath.Join(dir, "missing", "x.html")
	results = Check(context.Background(), h, Options{VisualizationPath: bad})
	if len(results) != 1 || results[0].Verdict != Ok || !strings.Contains(results[0].Summary, bad) {
		t.Errorf("results %+v, want Ok with the write failure in the summary", results)
	}
}

func TestCheck(t *testing.T) {
	register := ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> absent")
	tests := []struct {
		name string
		ops  []history.Op
		want []string // checker names
		v    Verdict
	}{
		{name: "no operations", v: Ok},
		{name: "other workloads only", ops: []history.Op{{ID: 1, Func: "scale", Key: "rs", Status: history.StatusOK}}, v: Ok},
		{name: "register operations", ops: register, want: []string{RegisterChecker}, v: Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := Check(context.Background(), &history.History{Ops: tt.ops}, Options{})
			var names []string
			for _, r := range results {
				names = append(names, r.Checker)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("checkers run (-want +got):\n%s", diff)
			}
			if got := Merge(results); got != tt.v {
				t.Errorf("overall verdict %s, want %s", got, tt.v)
			}
		})
	}
}
