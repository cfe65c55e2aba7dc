package checker

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/podsafe/podsafe/history"
)

func TestCheckRegister(t *testing.T) {
	tests := []struct {
		name string
		ops  []string
		want Verdict
	}{
		{name: "empty", want: Ok},
		{name: "sequential", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 30 get x -> a",
			"1 40 50 cas x a b -> ok",
			"1 60 70 get x -> b",
		}, want: Ok},
		{name: "stale read", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> ok",
			"2 40 50 get x -> a",
		}, want: Illegal},
		{name: "lost acknowledged write, seen by a cas", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> ok",
			"2 40 50 cas x a c -> ok",
		}, want: Illegal},
		{name: "lost acknowledged create, seen by a read", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 get x -> absent",
		}, want: Illegal},
		{name: "concurrent reads on both sides of a cas", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 100 cas x a b -> ok",
			"1 30 90 get x -> b",
			"2 40 80 get x -> a",
			"3 50 60 get x -> a",
			"3 70 75 get x -> b",
		}, want: Ok},
		{name: "reads that cannot be ordered", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 100 cas x a b -> ok",
			"1 30 40 get x -> b",
			"2 50 60 get x -> a",
		}, want: Illegal},
		{name: "concurrent creates, one wins", ops: []string{
			"0 0 50 create x a -> exists",
			"1 10 40 create x b -> ok",
			"2 60 70 get x -> b",
		}, want: Ok},
		{name: "concurrent creates, both win", ops: []string{
			"0 0 50 create x a -> ok",
			"1 10 40 create x b -> ok",
		}, want: Illegal},
		{name: "unknown cas that took effect", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 inf cas x a b -> ?",
			"2 30 40 get x -> b",
			"2 50 60 get x -> b",
		}, want: Ok},
		{name: "unknown cas that did not take effect", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 inf cas x a b -> ?",
			"2 30 40 get x -> a",
			"2 50 60 get x -> a",
		}, want: Ok},
		{name: "unknown cas that took effect late", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 inf cas x a b -> ?",
			"2 30 40 get x -> a",
			"2 1000 1010 get x -> b",
		}, want: Ok},
		{name: "unknown cas cannot undo itself", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 inf cas x a b -> ?",
			"2 30 40 get x -> b",
			"2 50 60 get x -> a",
		}, want: Illegal},
		{name: "unknown create and delete", ops: []string{
			"0 0 inf create x a -> ?",
			"1 10 inf delete x -> ?",
			"2 20 30 get x -> a",
			"2 40 50 get x -> absent",
			"3 60 70 create x b -> ok",
		}, want: Ok},
		{name: "failure with an unknown class may have taken effect", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> fail:internal error",
			"2 40 50 get x -> b",
		}, want: Ok},
		{name: "unavailable never takes effect", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> unavailable",
			"2 40 50 get x -> b",
		}, want: Illegal},
		{name: "failed cas whose expect held", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> conflict",
		}, want: Illegal},
		{name: "failed cas whose expect held, concurrent with a change", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x a b -> conflict",
			"2 15 35 cas x a c -> ok",
		}, want: Ok},
		{name: "cas notfound on a present key", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 cas x z b -> notfound",
		}, want: Ok},
		{name: "delete then read absent", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 30 delete x -> ok",
			"0 40 50 get x -> absent",
			"0 60 70 delete x -> notfound",
			"1 80 90 create x b -> ok",
		}, want: Ok},
		{name: "read after delete sees the old value", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 30 delete x -> ok",
			"1 40 50 get x -> a",
		}, want: Illegal},
		{name: "delete notfound on a present key", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 delete x -> notfound",
		}, want: Illegal},
		{name: "create exists after a delete", ops: []string{
			"0 0 10 create x a -> ok",
			"0 20 30 delete x -> ok",
			"1 40 50 create x b -> exists",
		}, want: Illegal},
		{name: "conditional delete", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 delete x b -> conflict",
			"1 40 50 delete x a -> ok",
			"2 60 70 get x -> notfound",
		}, want: Ok},
		{name: "conditional delete of the wrong value succeeds", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 delete x b -> ok",
		}, want: Illegal},
		{name: "conditional delete conflict on the expected value", ops: []string{
			"0 0 10 create x a -> ok",
			"1 20 30 delete x a -> conflict",
		}, want: Illegal},
		{name: "keys are independent", ops: []string{
			"0 0 10 create x a -> ok",
			"1 0 10 create y a -> ok",
			"0 20 30 cas x a b -> ok",
			"1 40 50 get y -> a",
			"0 40 50 get x -> b",
		}, want: Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := CheckRegister(context.Background(), ops(t, tt.ops...), Options{})
			if res.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s\n%s", res.Verdict, tt.want, res.Summary, evidenceText(res))
			}
			if diff := cmp.Diff([]string{GuaranteeStoreLin}, res.Guarantees); diff != "" {
				t.Errorf("guarantees (-want +got):\n%s", diff)
			}
			if tt.want == Illegal && (len(res.Evidence) == 0 || res.Evidence[0].Key != "x") {
				t.Errorf("Illegal without evidence naming key x: %+v", res.Evidence)
			}
		})
	}
}

func evidenceText(res Result) string {
	var b strings.Builder
	for _, e := range res.Evidence {
		b.WriteString(e.Description + "\n")
	}
	return b.String()
}

func TestStaleReadEvidence(t *testing.T) {
	h := ops(t,
		"0 0 10 create x a -> ok",
		"1 20 30 cas x a b -> ok",
		"3 25 28 get y -> absent",
		"2 40 50 get x -> a",
		"2 45 55 get x -> ?", // carries no information: left out
	)
	res := CheckRegister(context.Background(), h, Options{})
	want := Result{
		Checker:    RegisterChecker,
		Verdict:    Illegal,
		Guarantees: []string{GuaranteeStoreLin},
		Evidence: []Evidence{{
			Key:        "x",
			Ops:        []history.Op{h[0], h[1], h[3]},
			Linearized: []uint64{1, 2},
			State:      `"b"`,
			Blocked:    []uint64{4},
		}},
		Stats: Stats{Ops: 5, Checked: 4, Keys: 2},
	}
	ignore := cmpopts.IgnoreFields(Result{}, "Summary", "Stats.Duration")
	if diff := cmp.Diff(want, res, ignore, cmpopts.IgnoreFields(Evidence{}, "Description")); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	for _, s := range []string{`key "x"`, "2 of its 3 operations"} {
		if !strings.Contains(res.Summary, s) {
			t.Errorf("summary %q does not mention %q", res.Summary, s)
		}
	}
	for _, s := range []string{`leaves the key "b"`, `op 4 get(x) → "a" [40ns, 50ns]`} {
		if !strings.Contains(res.Evidence[0].Description, s) {
			t.Errorf("evidence %q does not mention %q", res.Evidence[0].Description, s)
		}
	}
	if _, err := json.Marshal(res); err != nil {
		t.Errorf("result does not encode to JSON: %v", err)
	}
}

func TestEvidenceSmallestKeyFirst(t *testing.T) {
	h := ops(t,
		"0 0 10 create big a -> ok",
		"0 20 30 cas big a b -> ok",
		"0 40 50 get big -> b",
		"0 60 70 get big -> a",
		"1 0 10 create small a -> ok",
		"1 20 30 get small -> absent",
		"2 0 10 create fine a -> ok",
	)
	res := CheckRegister(context.Background(), h, Options{MaxEvidence: 1})
	if res.Verdict != Illegal || len(res.Evidence) != 1 || res.Evidence[0].Key != "small" {
		t.Fatalf("verdict %s with evidence %+v, want Illegal naming only key small", res.Verdict, res.Evidence)
	}
	if !strings.Contains(res.Summary, "2 keys fail in all") {
		t.Errorf("summary %q does not count both failing keys", res.Summary)
	}
}

func TestCheckRegisterIgnoresOtherOps(t *testing.T) {
	h := ops(t, "0 0 10 create x a -> ok", "0 20 30 get x -> a")
	h = append(h, history.Op{ID: 9, Func: "scale", Key: "x", Value: "zzz", Status: history.StatusOK, Invoke: 15, Return: 16})
	res := CheckRegister(context.Background(), h, Options{})
	if res.Verdict != Ok || res.Stats.Ops != 2 {
		t.Errorf("verdict %s over %d ops, want Ok over 2", res.Verdict, res.Stats.Ops)
	}
}

func TestGeneratedHistories(t *testing.T) {
	for seed := range uint64(20) {
		h := generateRegister(genConfig{Seed: seed, Keys: 5, ClientsPerKey: 3, OpsPerKey: 60, UnknownRate: 0.05, UnavailableRate: 0.03, Latency: time.Millisecond})
		res := CheckRegister(context.Background(), h, Options{})
		if res.Verdict != Ok {
			t.Fatalf("seed %d: generated history is %s: %s\n%s", seed, res.Verdict, res.Summary, evidenceText(res))
		}
	}
}

// TestCheckerBites plants single faults in linearizable histories: each must
// turn the verdict to Illegal.
func TestCheckerBites(t *testing.T) {
	cfg := genConfig{Seed: 7, Keys: 20, ClientsPerKey: 3, OpsPerKey: 100, UnknownRate: 0.02, UnavailableRate: 0.02, Latency: time.Millisecond}
	mutations := []struct {
		name   string
		match  func(history.Op) bool
		mutate func(*history.Op)
	}{
		{"a read returns a value never written",
			func(o history.Op) bool { return o.Func == FuncGet && o.Status == history.StatusOK && o.Found },
			func(o *history.Op) { o.Output = "never-written" }},
		{"a successful create reports exists",
			func(o history.Op) bool { return o.Func == FuncCreate && o.Status == history.StatusOK },
			func(o *history.Op) { o.Status, o.Error = history.StatusFail, ErrorExists }},
		{"a successful delete reports notfound",
			func(o history.Op) bool { return o.Func == FuncDelete && o.Status == history.StatusOK },
			func(o *history.Op) { o.Status, o.Error = history.StatusFail, ErrorNotFound }},
		{"a read of a present key reports absent",
			func(o history.Op) bool { return o.Func == FuncGet && o.Status == history.StatusOK && o.Found },
			func(o *history.Op) { o.Found, o.Output = false, "" }},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			h := generateRegister(cfg)
			// Mutate the middle matching operation among those that no
			// write overlaps, on a key with no operation of unknown
			// outcome: nothing could excuse the change.
			excused := map[string]bool{}
			for _, o := range h {
				if Classify(o) == OutcomeUnknown {
					excused[o.Key] = true
				}
			}
			overlapped := func(o history.Op) bool {
				for _, w := range h {
					if w.Key == o.Key && w.ID != o.ID && w.Func != FuncGet && w.Invoke <= o.Return && o.Invoke <= w.Return {
						return true
					}
				}
				return false
			}
			var idx []int
			for i, o := range h {
				if m.match(o) && !excused[o.Key] && !overlapped(o) {
					idx = append(idx, i)
				}
			}
			if len(idx) == 0 {
				t.Fatal("no operation to mutate")
			}
			i := idx[len(idx)/2]
			m.mutate(&h[i])
			res := CheckRegister(context.Background(), h, Options{})
			if res.Verdict != Illegal {
				t.Fatalf("verdict %s after mutating op %d (%+v), want Illegal", res.Verdict, h[i].ID, h[i])
			}
			if got := res.Evidence[0].Key; got != h[i].Key {
				t.Errorf("evidence names key %q, want %q", got, h[i].Key)
			}
		})
	}
}

// hardHistory is one hot key with many concurrent clients: a search that
// takes porcupine far longer than the timeouts below.
func hardHistory() []history.Op {
	return generateRegister(genConfig{Seed: 1, Keys: 1, ClientsPerKey: 24, OpsPerKey: 4000, UnknownRate: 0.05, Latency: 50 * time.Millisecond})
}

func TestCheckRegisterBounded(t *testing.T) {
	h := hardHistory()
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		opts Options
	}{
		{"timeout option", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, Options{Timeout: 100 * time.Millisecond}},
		{"context deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, Options{}},
		{"context already cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			res := CheckRegister(ctx, h, tt.opts)
			if res.Verdict != Unknown {
				t.Errorf("verdict %s (%s), want Unknown", res.Verdict, res.Summary)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("a bounded check took %v", d)
			}
			t.Logf("%s after %v", res.Summary, time.Since(start))
		})
	}
}

func TestCheckRegisterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	res := CheckRegister(ctx, hardHistory(), Options{Timeout: time.Minute})
	// On a loaded machine the cancellation may come before the search
	// starts ("not checked: context canceled") or during it ("cancelled").
	if res.Verdict != Unknown || !strings.Contains(res.Summary, "cancel") {
		t.Errorf("verdict %s (%s), want Unknown after cancellation", res.Verdict, res.Summary)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a cancelled check took %v", d)
	}
}

func TestLargeGeneratedHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("100k operations")
	}
	h := generateRegister(benchConfig)
	res := CheckRegister(context.Background(), h, Options{})
	if res.Verdict != Ok {
		t.Fatalf("verdict %s: %s", res.Verdict, res.Summary)
	}
	unknown := 0
	for _, o := range h {
		if o.Return == math.MaxInt64 {
			unknown++
		}
	}
	t.Logf("%d ops (%d unknown) over %d keys checked in %v", len(h), unknown, res.Stats.Keys, res.Stats.Duration)
}

var benchConfig = genConfig{Seed: 2026, Keys: 1000, ClientsPerKey: 3, OpsPerKey: 100, UnknownRate: 0.02, UnavailableRate: 0.01, Latency: 2 * time.Millisecond}

func BenchmarkCheckRegister100k(b *testing.B) {
	h := generateRegister(benchConfig)
	ctx := context.Background()
	for b.Loop() {
		if res := CheckRegister(ctx, h, Options{}); res.Verdict != Ok {
			b.Fatalf("verdict %s: %s", res.Verdict, res.Summary)
		}
	}
	b.ReportMetric(float64(len(h))*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// withKeys renames the keys of a generated history with a prefix and
// renumbers its operations after firstID, so histories can be merged.
func withKeys(ops []history.Op, prefix string, firstID uint64) []history.Op {
	out := make([]history.Op, len(ops))
	for i, o := range ops {
		o.Key, o.ID = prefix+o.Key, firstID+uint64(i)
		out[i] = o
	}
	return out
}

// TestCheckRegisterPathologicalTimeout: a key whose search explodes is cut
// off by the timeout and answers Unknown promptly.
func TestCheckRegisterPathologicalTimeout(t *testing.T) {
	const timeout = 500 * time.Millisecond
	h := generatePathological("hot", 40, 1)
	start := time.Now()
	res := CheckRegister(context.Background(), h, Options{Timeout: timeout})
	took := time.Since(start)
	mustVerdict(t, res, Unknown)
	if took > 2*timeout {
		t.Errorf("a check bounded by %v took %v", timeout, took)
	}
	t.Logf("%s (after %v)", res.Summary, took)

	// A key that fails beside it is still shown, within 1.25 × the
	// timeout (the failing keys are re-checked alone for a quarter more).
	stale := []history.Op{
		{ID: 101, Process: 100, Func: FuncCreate, Key: "stale", Value: "a", Status: history.StatusOK, Invoke: 0, Return: 10},
		{ID: 102, Process: 101, Func: FuncCAS, Key: "stale", Expect: "a", Value: "b", Status: history.StatusOK, Invoke: 20, Return: 30},
		{ID: 103, Process: 102, Func: FuncGet, Key: "stale", Status: history.StatusOK, Found: true, Output: "a", Invoke: 40, Return: 50},
	}
	start = time.Now()
	res = CheckRegister(context.Background(), append(h, stale...), Options{Timeout: timeout})
	took = time.Since(start)
	mustVerdict(t, res, Illegal)
	if res.Evidence[0].Key != "stale" {
		t.Errorf("evidence about %q, want stale", res.Evidence[0].Key)
	}
	if took > 2*timeout {
		t.Errorf("a check bounded by %v took %v", timeout, took)
	}
}

// TestCheckRegisterMemoryBudget: a key whose search would outgrow the memory
// budget answers Unknown, named in the Summary, while the other keys are
// still judged.
func TestCheckRegisterMemoryBudget(t *testing.T) {
	const budget = 4 << 20
	clean := withKeys(generateRegister(genConfig{Seed: 3, Keys: 4, ClientsPerKey: 3, OpsPerKey: 80, UnknownRate: 0.05, Latency: time.Millisecond}), "clean-", 1000)
	stale := []history.Op{
		{ID: 1, Process: 100, Func: FuncCreate, Key: "stale", Value: "a", Status: history.StatusOK, Invoke: 0, Return: 10},
		{ID: 2, Process: 101, Func: FuncCAS, Key: "stale", Expect: "a", Value: "b", Status: history.StatusOK, Invoke: 20, Return: 30},
		{ID: 3, Process: 102, Func: FuncGet, Key: "stale", Status: history.StatusOK, Found: true, Output: "a", Invoke: 40, Return: 50},
	}
	hot := generatePathological("hot", 40, 100)
	merge := func(parts ...[]history.Op) []history.Op {
		var all []history.Op
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}

	t.Run("hot key alone is Unknown", func(t *testing.T) {
		start := time.Now()
		res, _ := checkRegisterWithin(context.Background(), merge(clean, hot), Options{Timeout: time.Minute}, budget)
		mustVerdict(t, res, Unknown)
		mustMention(t, "summary", res.Summary, `key "hot"`, "memory budget of 4 MiB")
		if strings.Contains(res.Summary, "clean-") {
			t.Errorf("summary blames a clean key: %s", res.Summary)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the budget stopped the search only after %v", took)
		}
		if res.Stats.Keys != 5 {
			t.Errorf("%d keys, want 5", res.Stats.Keys)
		}
	})
	t.Run("an Illegal key still makes Illegal", func(t *testing.T) {
		res, _ := checkRegisterWithin(context.Background(), merge(clean, hot, stale), Options{Timeout: time.Minute}, budget)
		mustVerdict(t, res, Illegal)
		if len(res.Evidence) != 1 || res.Evidence[0].Key != "stale" {
			t.Fatalf("evidence %s, want key stale only", evidenceText(res))
		}
		mustMention(t, "summary", res.Summary, `key "stale" is not linearizable`, `key "hot"`, "memory budget")
	})
	t.Run("without the hot key the budget is ample", func(t *testing.T) {
		res, _ := checkRegisterWithin(context.Background(), clean, Options{}, budget)
		mustVerdict(t, res, Ok)
		res, _ = checkRegisterWithin(context.Background(), merge(clean, stale), Options{}, budget)
		mustVerdict(t, res, Illegal)
	})
	t.Run("a budget too small for any key", func(t *testing.T) {
		res, _ := checkRegisterWithin(context.Background(), clean, Options{}, 1)
		mustVerdict(t, res, Unknown)
		mustMention(t, "summary", res.Summary, "keys", "clean-k0000", "memory budget")
	})
}

func TestSearchStateBytes(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want int64
	}{{0, searchStateOverhead}, {1, 8 + searchStateOverhead}, {64, 8 + searchStateOverhead}, {65, 16 + searchStateOverhead}, {100000, 8*1563 + searchStateOverhead}} {
		if got := searchStateBytes(tt.n); got != tt.want {
			t.Errorf("searchStateBytes(%d) = %d, want %d", tt.n, got, tt.want)
		}
	}
}
