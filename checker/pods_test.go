package checker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// scaledBase and wallBase are the clocks of hand-made histories: the scaled
// clock reads scaledBase + t, and wall time runs 1,000 times slower.
var (
	scaledBase = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	wallBase   = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
)

// hb builds a history by hand. Times are seconds: the recorder time t and
// the scaled clock advance together, so that API calls and ledger entries
// can be placed among each other. Entries must be added in ledger order.
type hb struct {
	h history.History
}

// secs converts seconds to recorder nanoseconds.
func secs(s float64) int64 { return int64(s * float64(time.Second)) }

// led appends a ledger entry at t seconds; by default in namespace
// "default", container "c".
func (b *hb) led(t float64, action history.LedgerAction, node, pod, uid string, mods ...func(*history.LedgerEntry)) *hb {
	e := history.LedgerEntry{
		Node: node, Namespace: "default", Pod: pod, UID: uid, Container: "c", Action: action,
		Scaled: scaledBase.Add(time.Duration(secs(t))), Wall: wallBase.Add(time.Duration(secs(t)) / 1000), T: secs(t),
	}
	for _, m := range mods {
		m(&e)
	}
	b.h.Ledger = append(b.h.Ledger, e)
	if e.T > b.h.End {
		b.h.End = e.T
	}
	return b
}

// call appends an API call invoked at t and returning 10 ms later, ok with
// code 200 unless mods say otherwise. Calls must be added in invoke order.
func (b *hb) call(t float64, identity, verb, resource, ns, name string, mods ...func(*history.APICall)) *hb {
	c := history.APICall{
		Identity: identity, Verb: verb, Resource: resource, Namespace: ns, Name: name,
		Code: 200, Outcome: history.StatusOK, Invoke: secs(t), Return: secs(t + 0.01), T: secs(t + 0.01),
	}
	for _, m := range mods {
		m(&c)
	}
	b.h.API = append(b.h.API, c)
	if c.Return > b.h.End {
		b.h.End = c.Return
	}
	return b
}

func (b *hb) history() *history.History { return &b.h }

// Modifiers of ledger entries and API calls.
func ctr(name string) func(*history.LedgerEntry) {
	return func(e *history.LedgerEntry) { e.Container = name }
}
func grace(g int64) func(*history.LedgerEntry) { return func(e *history.LedgerEntry) { e.Grace = g } }
func wallLag(d time.Duration) func(*history.LedgerEntry) {
	return func(e *history.LedgerEntry) { e.Wall = e.Wall.Add(d) }
}
func vol(v string, token int64) func(*history.LedgerEntry) {
	return func(e *history.LedgerEntry) { e.Volume, e.Token = v, token }
}
func uid(u string) func(*history.APICall) { return func(c *history.APICall) { c.UID = u } }
func sub(s string) func(*history.APICall) { return func(c *history.APICall) { c.Subresource = s } }
func askGrace(g int64) func(*history.APICall) {
	return func(c *history.APICall) { c.GracePeriodSeconds = &g }
}
func code(n int) func(*history.APICall) { return func(c *history.APICall) { c.Code = n } }
func outcome(s history.Status) func(*history.APICall) {
	return func(c *history.APICall) {
		c.Outcome = s
		if s != history.StatusOK {
			c.Code = 0
		}
	}
}
func notFound(c *history.APICall) { c.Code, c.Outcome = 404, history.StatusFail }

// created records the pet controller (or another identity) creating pod
// name with UID u.
func (b *hb) created(t float64, identity, name, u string) *hb {
	return b.call(t, identity, "create", "pods", "default", name, uid(u))
}

// evidenceActions lists the actions of an evidence's ledger entries.
func evidenceActions(ev Evidence) []string {
	var out []string
	for _, e := range ev.Ledger {
		out = append(out, e.UID+":"+string(e.Action))
	}
	return out
}

// mustVerdict fails unless res has verdict want; it returns res.
func mustVerdict(t *testing.T, res Result, want Verdict) Result {
	t.Helper()
	t.Logf("%s: %s", res.Verdict, res.Summary)
	for _, ev := range res.Evidence {
		t.Logf("  evidence %s: %s", ev.Key, ev.Description)
	}
	if res.Verdict != want {
		t.Fatalf("verdict %s, want %s: %s\nevidence: %+v", res.Verdict, want, res.Summary, res.Evidence)
	}
	if res.Summary == "" {
		t.Errorf("empty summary")
	}
	if want == Illegal && len(res.Evidence) == 0 {
		t.Errorf("Illegal without evidence: %s", res.Summary)
	}
	return res
}

// mustResult is mustVerdict that also wants the summary or the first
// evidence's description to mention each of words.
func mustResult(t *testing.T, res Result, want Verdict, words ...string) Result {
	t.Helper()
	res = mustVerdict(t, res, want)
	text := res.Summary
	if len(res.Evidence) > 0 {
		text += "\n" + res.Evidence[0].Description
	}
	mustMention(t, "result", text, words...)
	return res
}

func mustMention(t *testing.T, what, text string, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(text, w) {
			t.Errorf("%s does not mention %q:\n%s", what, w, text)
		}
	}
}

var bg = context.Background()

func TestIsPetName(t *testing.T) {
	for name, want := range map[string]bool{
		"web-0": true, "web-12": true, "my-set-3": true,
		"web": false, "web-": false, "-0": false, "web-01": false, "web-x": false, "web-1a": false, "rs-x7k2p": false,
	} {
		if got := isPetName(name); got != want {
			t.Errorf("isPetName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestContainerRuns(t *testing.T) {
	b := &hb{}
	b.led(1, history.LedgerStart, "n1", "p", "a").
		led(2, history.LedgerStart, "n1", "p", "a", ctr("side")).
		led(3, history.LedgerExit, "n1", "p", "a").
		led(4, history.LedgerStart, "n1", "p", "a"). // restarted
		led(5, history.LedgerPowerOff, "n1", "p", "a").
		led(5.1, history.LedgerExit, "n1", "p", "a"). // the exit after the power-off
		led(6, history.LedgerExit, "n2", "q", "b")    // an end without a start
	got := containerRuns(b.h.Ledger)
	want := []run{
		{uid: "a", pod: "default/p", node: "n1", container: "c", start: 0, end: 2},
		{uid: "a", pod: "default/p", node: "n1", container: "side", start: 1, end: endless},
		{uid: "a", pod: "default/p", node: "n1", container: "c", start: 3, end: 4},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(run{})); diff != "" {
		t.Errorf("runs (-want +got):\n%s", diff)
	}
}

func TestFirstOverlap(t *testing.T) {
	tests := []struct {
		name   string
		runs   []run
		a, b   string // uids; "" for none
		bStart int
	}{
		{name: "none"},
		{name: "one UID overlapping itself", runs: []run{{uid: "a", start: 0, end: 5}, {uid: "a", start: 1, end: 3}}},
		{name: "back to back", runs: []run{{uid: "a", start: 0, end: 1}, {uid: "b", start: 2, end: 3}, {uid: "c", start: 4, end: endless}}},
		{name: "overlap", runs: []run{{uid: "a", start: 0, end: 5}, {uid: "b", start: 3, end: 9}}, a: "a", b: "b", bStart: 3},
		{name: "hidden behind a longer run of the same UID", runs: []run{
			{uid: "a", start: 0, end: 9}, {uid: "b", start: 1, end: 2}, {uid: "a", start: 3, end: 4}}, a: "a", b: "b", bStart: 1},
		{name: "second-best end", runs: []run{
			{uid: "a", start: 0, end: 8}, {uid: "b", start: 2, end: 9}, {uid: "b", start: 10, end: 11}, {uid: "a", start: 12, end: 13}}, a: "a", b: "b", bStart: 2},
		{name: "endless", runs: []run{{uid: "b", start: 7, end: 8}, {uid: "a", start: 0, end: endless}}, a: "a", b: "b", bStart: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, ok := firstOverlap(tt.runs)
			if ok != (tt.a != "") {
				t.Fatalf("overlap = %v (%+v, %+v), want %v", ok, a, b, tt.a != "")
			}
			if ok && (a.uid != tt.a || b.uid != tt.b || b.start != tt.bStart) {
				t.Errorf("overlap %s/%s at %d, want %s/%s at %d", a.uid, b.uid, b.start, tt.a, tt.b, tt.bStart)
			}
		})
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) { return context.WithCancel(bg) }
