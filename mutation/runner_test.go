package mutation

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakePodsafe writes a script standing in for a podsafe binary: it finds
// --store in its arguments and runs body with $store set.
func fakePodsafe(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "podsafe")
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --store ]; then store=$2; fi; shift; done\n" + body + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunScenario(t *testing.T) {
	const results = `mkdir -p "$store/s/r" && cat > "$store/s/r/results.json" <<'J'
{"scenario":"s","seed":1,"verdict":"Illegal","checks":[
 {"checker":"grace","verdict":"Illegal","guarantees":["PS-4","GP-2"],"summary":"x","stats":{}},
 {"checker":"phases","verdict":"Ok","guarantees":["LC-2"],"summary":"y","stats":{}},
 {"checker":"authority","verdict":"Illegal","guarantees":["PS-9","PS-4"],"summary":"z","stats":{}}]}
J
exit 1`
	ex := &executor{runTimeout: 2 * time.Second}
	for _, c := range []struct {
		name, body, verdict string
		illegal, ids        []string
		err                 string
	}{
		{"illegal", results, "Illegal", []string{"grace", "authority"}, []string{"GP-2", "PS-4", "PS-9"}, ""},
		{"ok", `mkdir -p "$store/s/r" && echo '{"verdict":"Ok","checks":[]}' > "$store/s/r/results.json"`, "Ok", nil, nil, ""},
		{"crash", `echo panic: boom; exit 3`, verdictCrashed, nil, nil, "the run wrote no results.json"},
		{"timeout", `sleep 30`, verdictTimedOut, nil, nil, "no verdict after 2s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := ex.runScenario(context.Background(), fakePodsafe(t, c.body), dir, "stale-read")
			if r.Verdict != c.verdict || !cmp.Equal(r.Illegal, c.illegal) || !cmp.Equal(r.Guarantees, c.ids) {
				t.Errorf("run = %+v, want verdict %s, illegal %v, guarantees %v", r, c.verdict, c.illegal, c.ids)
			}
			if !strings.Contains(r.Error, c.err) {
				t.Errorf("error %q, want %q", r.Error, c.err)
			}
			if c.name == "crash" && !strings.Contains(r.Error, "panic: boom") {
				t.Errorf("a crash's error lacks its output: %q", r.Error)
			}
			if r.Seconds <= 0 {
				t.Errorf("the run's time is not recorded")
			}
			// The run's store is removed; the scenario file stays for the
			// mutant's directory to be removed with it.
			left, _ := os.ReadDir(dir)
			for _, e := range left {
				if e.IsDir() {
					t.Errorf("%s left behind", e.Name())
				}
			}
			if !slices.ContainsFunc(left, func(e os.DirEntry) bool { return e.Name() == "mutation-stale-read.json" }) {
				t.Errorf("no scenario file written")
			}
		})
	}
}
