package report

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

func TestRenderDir(t *testing.T) {
	dir := t.TempDir()
	writeTestRun(t, dir)
	os.WriteFile(filepath.Join(dir, LinearizabilityFile), []byte("<html></html>"), 0o644)
	if err := RenderDir(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`<span class="badge v-illegal">Illegal</span> pets-partition`,
		"seed 7",
		"podsafe test --workload pets --seed 7",
		"13s (history spans 12.000s)",
		`href="linearizability.html"`,
		`id="timeline-box"`,
		// The healed partition in both of its targets' lanes, the
		// unhealed fault marked so.
		`>cut node-1</text>`,
		`kill-kubelet on node-0: 9.000s → 12.000s (never healed)`,
		`class="fault unhealed"`,
		// Rates and the violation mark at the evidence's first entry.
		`class="bar ok"`, `class="bar fail"`, `class="violation"`,
		"at-most-one at 1.000s",
		// The Gantt: runs per node, TERM, KILL, power-off, refused write.
		`>node-0</text>`, `>node-1</text>`,
		`TERM db-0/app at 4.000s`, `KILL db-0/app at 5.000s`,
		`refused write by db-0/app at 4.500s`, `power-off of db-1/app at 10.000s`,
		"killed, exit at 5.100s", "still running at the end",
		// Evidence as a table, figures.
		"<caption>ledger entries</caption>", "uid-a", "time to recovery",
		// The guarantee table.
		`<td class="id">PS-1</td>`, NotJudged,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Count(page, `class="fault"`) != 2 {
		t.Errorf("%d healed fault bands, want 2 (node-1 and cp-0)", strings.Count(page, `class="fault"`))
	}
	// Self-contained: nothing loaded from elsewhere.
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//|@import|url\(`).FindString(page); m != "" {
		t.Errorf("report.html loads something from elsewhere: %q", m)
	}
	j := readJUnit(t, filepath.Join(dir, JUnitFile))
	if j.Failures == 0 {
		t.Errorf("junit.xml: %+v, want failures", j)
	}
}

func TestRenderEscapes(t *testing.T) {
	dir := t.TempDir()
	writeTestRun(t, dir)
	if err := RenderDir(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ReportFile))
	page := string(b)
	if strings.Contains(page, evil) || strings.Contains(page, `<script>alert`) {
		t.Fatalf("report.html carries hostile text unescaped")
	}
	if !strings.Contains(page, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&lt;b&gt;`) {
		t.Errorf("report.html lacks the escaped hostile text")
	}
	// Only the page's own two scripts.
	if n := strings.Count(page, "<script>"); n != 2 {
		t.Errorf("%d <script> elements, want 2", n)
	}
}

func TestRenderCaps(t *testing.T) {
	h := &history.History{End: 100 * sec}
	for i := 0; i < maxGanttRows+50; i++ {
		uid := fmt.Sprintf("uid-%d", i)
		h.Ledger = append(h.Ledger,
			ledger(fmt.Sprintf("node-%d", i%3), fmt.Sprintf("p-%d", i), uid, history.LedgerStart, int64(i)*1e8),
			ledger(fmt.Sprintf("node-%d", i%3), fmt.Sprintf("p-%d", i), uid, history.LedgerExit, int64(i)*1e8+5e7))
	}
	for i := 0; i < 100000; i++ {
		h.Ops = append(h.Ops, history.Op{ID: uint64(i), Invoke: int64(i) * 1e6, Status: history.StatusOK})
	}
	page, err := RenderRun(h, &Results{Scenario: "big"}, "")
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	want := fmt.Sprintf("the Gantt chart shows %d of %d container runs", maxGanttRows, maxGanttRows+50)
	if !strings.Contains(s, "Capped for speed") || !strings.Contains(s, want) {
		t.Errorf("report.html does not say the Gantt was capped (%q)", want)
	}
	if n := strings.Count(s, `class="run"`); n != maxGanttRows {
		t.Errorf("%d Gantt bars, want %d", n, maxGanttRows)
	}
	if n := strings.Count(s, `class="bar ok"`); n > timelineBuckets {
		t.Errorf("%d op rate bars for 100000 ops, want at most %d buckets", n, timelineBuckets)
	}
	if len(page) > 1<<20 {
		t.Errorf("report.html is %d bytes; capping should keep it small", len(page))
	}
}

func TestRenderWithoutHistory(t *testing.T) {
	page, err := RenderRun(nil, &Results{Scenario: "lost"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "The ledger holds no container runs") {
		t.Errorf("a page without a history should still render")
	}
}

func TestExecutions(t *testing.T) {
	h := &history.History{End: 20 * sec}
	h.Ledger = []history.LedgerEntry{
		ledger("n1", "a", "u1", history.LedgerStart, 1*sec),
		ledger("n1", "a", "u1", history.LedgerTerm, 2*sec),
		ledger("n1", "a", "u1", history.LedgerExit, 3*sec),
		ledger("n1", "a", "u1", history.LedgerStart, 4*sec), // a restart
		ledger("n2", "b", "u2", history.LedgerStart, 1*sec),
		ledger("n2", "c", "u3", history.LedgerStart, 2*sec),
		ledger("n2", "", "", history.LedgerPowerOff, 5*sec),
		ledger("n1", "z", "u9", history.LedgerExit, 6*sec), // exit with no start: ignored
	}
	type run struct {
		Pod        string
		Start, End int64
		Ended      history.LedgerAction
		Terms      int
	}
	var got []run
	for _, e := range executions(h) {
		got = append(got, run{e.Pod, e.Start / sec, e.End / sec, e.Ended, len(e.Terms)})
	}
	want := []run{
		{"a", 1, 3, history.LedgerExit, 1},
		{"a", 4, 20, "", 0},
		{"b", 1, 5, history.LedgerPowerOff, 0},
		{"c", 2, 5, history.LedgerPowerOff, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestRenderDirErrors(t *testing.T) {
	missing := t.TempDir()
	corruptResults := t.TempDir()
	os.WriteFile(filepath.Join(corruptResults, ResultsFile), []byte(`{"scenario": `), 0o644)
	noHistory := t.TempDir()
	WriteResults(noHistory, Results{Scenario: "s"})
	corruptHistory := t.TempDir()
	WriteResults(corruptHistory, Results{Scenario: "s"})
	os.WriteFile(filepath.Join(corruptHistory, HistoryFile), []byte(`{"kind":"meta","t":0}`+"\n"+`{"kind":"invoke","t":1,"id":1}`+"\n"+`{"kind":"complete","t":2,"id":2}`+"\n"), 0o644)
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"missing results", missing, filepath.Join(missing, ResultsFile)},
		{"corrupt results", corruptResults, filepath.Join(corruptResults, ResultsFile)},
		{"missing history", noHistory, filepath.Join(noHistory, HistoryFile)},
		{"corrupt history", corruptHistory, filepath.Join(corruptHistory, HistoryFile) + ":3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := RenderDir(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("RenderDir: %v, want an error naming %s", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(tc.dir, ReportFile)); err == nil {
				t.Errorf("a report.html was written from bad input")
			}
		})
	}
}
