package checker

import (
	"context"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
)

// A part of the view is built once, whoever asks first, and shared.
func TestViewPartOnce(t *testing.T) {
	v := newView(bg, &history.History{})
	var p part[int]
	builds := 0
	build := func(context.Context) (int, bool) { builds++; return 7, true }
	for range 3 {
		if n, ok := p.get(bg, v, "thing", build); !ok || n != 7 {
			t.Fatalf("get = %d, %v", n, ok)
		}
	}
	if builds != 1 {
		t.Errorf("built %d times", builds)
	}
	if pt := v.partTimes(); len(pt) != 1 || pt[0].name != "thing" {
		t.Errorf("part times %+v", pt)
	}
}

// A build that panics makes every checker that reads the part answer
// Unknown with the panic (check-safe), and crashes nothing else.
func TestViewPartCrash(t *testing.T) {
	v := newView(bg, &history.History{})
	var p part[int]
	build := func(context.Context) (int, bool) { panic("boom") }
	for range 2 {
		res := checkSafe("x", func() Result {
			p.get(bg, v, "thing", build)
			return Result{Checker: "x", Verdict: Ok, Summary: "read it"}
		})
		mustVerdict(t, res, Unknown)
		mustMention(t, "summary", res.Summary, "building the shared thing: boom")
	}
}

// A checker whose time runs out stops waiting for a part another is
// building; the build goes on for the others.
func TestViewPartWait(t *testing.T) {
	v := newView(bg, &history.History{})
	var p part[int]
	release := make(chan struct{})
	build := func(context.Context) (int, bool) { <-release; return 1, true }
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if _, ok := p.get(ctx, v, "slow", build); ok {
		t.Fatal("got the part before it was built")
	}
	close(release)
	if n, ok := p.get(bg, v, "slow", build); !ok || n != 1 {
		t.Errorf("get after the build = %d, %v", n, ok)
	}
}
