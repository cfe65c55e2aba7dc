package checker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

func TestAnnotations(t *testing.T) {
	h := &history.History{
		Nemesis: []history.Interval{
			{Name: "partition", Description: "isolate leader", Targets: []string{"cp1", "cp2"}, Start: 10, End: 20, Healed: true},
			{Name: "pause", Start: 15, End: 99},
		},
		Logs: []history.LogEntry{{Msg: "healing all faults", Attrs: map[string]string{"phase": "heal", "faults": "2"}, T: 30}},
	}
	want := []porcupine.Annotation{
		{Tag: "nemesis: partition", Start: 10, End: 20, Description: "partition", Details: "isolate leader; targets: cp1, cp2", BackgroundColor: faultColor},
		{Tag: "nemesis: pause", Start: 15, End: 99, Description: "pause", Details: "never healed", BackgroundColor: faultColor},
		{Tag: "harness", Start: 30, Description: "healing all faults", Details: "faults=2 phase=heal", BackgroundColor: harnessColor},
	}
	if diff := cmp.Diff(want, Annotations(h), cmp.AllowUnexported(porcupine.Annotation{})); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func TestWriteVisualization(t *testing.T) {
	tests := []struct {
		name string
		ops  []string
		want Verdict
	}{
		{name: "linearizable", ops: []string{"0 0 10 create x a -> ok", "1 5 inf cas x a b -> ?", "2 20 30 get x -> b"}, want: Ok},
		{name: "stale read", ops: []string{"0 0 10 create x a -> ok", "1 20 30 cas x a b -> ok", "2 40 50 get x -> a"}, want: Illegal},
		{name: "no register operations", want: Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &history.History{
				Ops:     ops(t, tt.ops...),
				Nemesis: []history.Interval{{Name: "partition-majority", Description: "cut the leader off", Start: 12, End: 35, Healed: true}},
				Logs:    []history.LogEntry{{Msg: "phase: heal", T: 36}},
			}
			path := filepath.Join(t.TempDir(), "linearizability.html")
			res, err := WriteVisualization(context.Background(), path, h, Options{})
			if err != nil {
				t.Fatalf("WriteVisualization: %v", err)
			}
			if res.Verdict != tt.want {
				t.Errorf("verdict %s, want %s", res.Verdict, tt.want)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			html := string(data)
			for _, s := range []string{"<html", "partition-majority", "cut the leader off", "phase: heal"} {
				if !strings.Contains(html, s) {
					t.Errorf("visualization lacks %q", s)
				}
			}
			if len(tt.ops) > 0 && !strings.Contains(html, `create(x, \"a\")`) {
				t.Errorf("visualization lacks the operation descriptions")
			}
		})
	}
}

func TestWriteVisualizationError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "x.html")
	if _, err := WriteVisualization(context.Background(), path, &history.History{}, Options{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v, want one naming %s", err, path)
	}
}
