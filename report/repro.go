package report

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
)

// ReproRow is one run of a reproduction of an upstream bug (a scripted kube
// run, repro/*.yaml): the release it ran on, how podsafe's kubelets listed
// their pods, and what the checkers said.
type ReproRow struct {
	// Issue is the upstream issue ("kubernetes/kubernetes#59848"), from the
	// scenario's name ("kubernetes-59848", "etcd-15271").
	Issue    string `json:"issue"`
	Scenario string `json:"scenario"`
	// Variant is what the scenario's name adds after the issue number
	// ("gate-off" of kubernetes-138698-gate-off), "" for the plain one.
	Variant string `json:"variant,omitempty"`
	// Kubernetes and Etcd are the releases the run started.
	Kubernetes string `json:"kubernetes"`
	Etcd       string `json:"etcd,omitempty"`
	// PodList is the kubelets' pod list mode ("list", "watch-list").
	PodList string          `json:"podList,omitempty"`
	Verdict checker.Verdict `json:"verdict"`
	// Reproduced: a checker said Illegal.
	Reproduced bool `json:"reproduced"`
	// Checker and Guarantees name the first checker that said Illegal;
	// Evidence is its summary.
	Checker    string   `json:"checker,omitempty"`
	Guarantees []string `json:"guarantees,omitempty"`
	Evidence   string   `json:"evidence"`
	// Detected is how long after the run's start the first violating ledger
	// entry came (0 when none).
	Detected time.Duration `json:"detected,omitempty"`
	// Sync says how the first pod sync of a node's kubelet after the node
	// came back (the last power-on of the run) went: the call, how long it
	// took and the resourceVersion it answered at.
	Sync    string    `json:"sync,omitempty"`
	Dir     string    `json:"dir"`
	Started time.Time `json:"started"`
}

// ReproRows reads every run under store whose scenario is a reproduction
// (its name names an upstream issue), newest last.
func ReproRows(store string) ([]ReproRow, error) {
	var rows []ReproRow
	err := filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "results.json" {
			return err
		}
		dir := filepath.Dir(path)
		res, err := ReadResults(dir)
		if err != nil {
			return err
		}
		issue, variant := issueOf(res.Scenario)
		if issue == "" {
			return nil
		}
		row := ReproRow{Issue: issue, Scenario: res.Scenario, Variant: variant, Verdict: res.Verdict, Dir: dir, Started: res.Started}
		for _, c := range res.Checks {
			if c.Verdict != checker.Illegal {
				continue
			}
			row.Reproduced, row.Checker, row.Guarantees, row.Evidence = true, c.Checker, c.Guarantees, c.Summary
			for _, e := range c.Evidence {
				if n := len(e.Ledger); n > 0 && !res.Started.IsZero() {
					row.Detected = e.Ledger[n-1].Wall.Sub(res.Started).Round(100 * time.Millisecond)
					break
				}
				if e.At > 0 {
					row.Detected = time.Duration(e.At).Round(100 * time.Millisecond)
					break
				}
			}
			break
		}
		if !row.Reproduced {
			row.Evidence = summaryOf(*res)
		}
		if h, err := history.Load(filepath.Join(dir, HistoryFile)); err == nil {
			row.Kubernetes, row.Etcd, row.PodList = runLogs(h)
			row.Sync = firstSync(h)
		}
		rows = append(rows, row)
		return nil
	})
	slices.SortStableFunc(rows, func(a, b ReproRow) int {
		if c := strings.Compare(a.Issue, b.Issue); c != 0 {
			return c
		}
		if c := strings.Compare(a.Variant, b.Variant); c != 0 {
			return c
		}
		if c := strings.Compare(a.Kubernetes, b.Kubernetes); c != 0 {
			return c
		}
		if c := strings.Compare(a.PodList, b.PodList); c != 0 {
			return c
		}
		return a.Started.Compare(b.Started)
	})
	return rows, err
}

// issueOf maps a reproduction's scenario name to its upstream issue and
// variant: "kubernetes-59848" is kubernetes/kubernetes#59848,
// "kubernetes-138698-gate-off" its variant "gate-off".
func issueOf(scenario string) (issue, variant string) {
	for prefix, repo := range map[string]string{"kubernetes-": "kubernetes/kubernetes", "etcd-": "etcd-io/etcd"} {
		rest, ok := strings.CutPrefix(scenario, prefix)
		if !ok {
			continue
		}
		n, variant, _ := strings.Cut(rest, "-")
		if n != "" && strings.Trim(n, "0123456789") == "" && (variant != "" || !strings.HasSuffix(rest, "-")) {
			return repo + "#" + n, variant
		}
	}
	return "", ""
}

// summaryOf is what a run that reproduced nothing says: the checkers'
// verdicts, or why it broke.
func summaryOf(res Results) string {
	if res.Error != "" {
		return "the run broke: " + res.Error
	}
	var parts []string
	for _, c := range res.Checks {
		parts = append(parts, fmt.Sprintf("%s %s", c.Checker, c.Verdict))
	}
	return strings.Join(parts, ", ")
}

// runLogs reads the releases and the kubelets' pod list mode from the
// history's log lines ("kube target started", "kubelets").
func runLogs(h *history.History) (kubernetes, etcd, podList string) {
	for _, l := range h.Logs {
		switch l.Msg {
		case "kube target started":
			kubernetes, etcd = l.Attrs["kubernetes"], l.Attrs["etcd"]
		case "kubelets":
			podList = l.Attrs["pod_list"]
		}
	}
	return kubernetes, etcd, podList
}

// ReproMarkdown renders rows as the README's table: one row per issue,
// release and pod list mode (the newest run of each), with the verdict,
// the evidence and the time to detect.
func ReproMarkdown(rows []ReproRow) string {
	latest := map[string]ReproRow{}
	var keys []string
	for _, r := range rows {
		k := r.Issue + "|" + r.Variant + "|" + r.Kubernetes + "|" + r.PodList
		if _, ok := latest[k]; !ok {
			keys = append(keys, k)
		}
		latest[k] = r
	}
	var b strings.Builder
	b.WriteString("| issue | Kubernetes (etcd) | kubelet lists by | podsafe verdict | evidence | the node's first sync | detected after |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		r := latest[k]
		verdict := "not reproduced (" + string(r.Verdict) + ")"
		detected := "—"
		if r.Reproduced {
			verdict = fmt.Sprintf("**reproduced**: %s Illegal (%s)", r.Checker, strings.Join(r.Guarantees, ", "))
			if r.Detected > 0 {
				detected = r.Detected.String()
			}
		}
		issue := r.Issue
		if r.Variant != "" {
			issue += " (" + r.Variant + ")"
		}
		fmt.Fprintf(&b, "| %s | %s (%s) | %s | %s | %s | %s | %s |\n", issue, r.Kubernetes, r.Etcd, r.PodList, verdict,
			strings.ReplaceAll(r.Evidence, "|", "\\|"), r.Sync, detected)
	}
	return b.String()
}

// firstSync describes the first pod LIST or WATCH of the kubelet of the node
// last powered on, after that power-on ("" when there is none).
func firstSync(h *history.History) string {
	var on *history.Interval
	for i := range h.Nemesis {
		if iv := &h.Nemesis[i]; iv.FaultEffect() == history.EffectPowerOn && len(iv.FaultNodes()) == 1 {
			on = iv
		}
	}
	if on == nil {
		return ""
	}
	node := on.FaultNodes()[0]
	for _, c := range h.API {
		if c.Identity != "kubelet:"+node || c.Resource != "pods" || c.Invoke < on.Start || (c.Verb != "list" && c.Verb != "watch") {
			continue
		}
		took := time.Duration(c.Return - c.Invoke).Round(10 * time.Millisecond)
		what := "LIST resourceVersion=0"
		if c.Verb == "watch" {
			what = "watch-list"
		}
		out := fmt.Sprintf("%s's first pod sync after power-on: %s, answered %s after it was sent", node, what, took)
		if c.ResourceVersion != "" {
			out += " at resourceVersion " + c.ResourceVersion
		}
		return out
	}
	return node + "'s kubelet made no pod LIST or WATCH after power-on"
}
