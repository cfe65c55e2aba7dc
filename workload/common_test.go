package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

// An outcome the API definitely refused is a failure; anything that may
// have been applied is unknown. A wrong verdict here would let a checker
// treat an operation that may have happened as one that did not.
func TestOutcome(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	timeoutErr := &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}
	for _, tc := range []struct {
		name   string
		err    error
		status history.Status
		class  string
	}{
		{"ok", nil, history.StatusOK, ""},
		{"exists", apierrors.NewAlreadyExists(gr, "p"), history.StatusFail, ErrClassExists},
		{"conflict", apierrors.NewConflict(gr, "p", errors.New("rv")), history.StatusFail, ErrClassConflict},
		{"not found", apierrors.NewNotFound(gr, "p"), history.StatusFail, ErrClassNotFound},
		{"unavailable", apierrors.NewServiceUnavailable("no leader"), history.StatusFail, ErrClassUnavailable},
		{"forbidden", apierrors.NewForbidden(gr, "p", errors.New("PS-9")), history.StatusFail, ErrClassForbidden},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), history.StatusFail, ErrClassInvalid},
		{"bad request", apierrors.NewBadRequest("no"), history.StatusFail, ErrClassInvalid},
		{"too many", apierrors.NewTooManyRequests("slow down", 1), history.StatusFail, ErrClassThrottled},
		{"gone", apierrors.NewGone("old"), history.StatusFail, ErrClassRejected},
		{"timeout 504", apierrors.NewTimeoutError("outcome unknown", 0), history.StatusUnknown, ErrClassTimeout},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 0), history.StatusUnknown, ErrClassTimeout},
		{"internal 500", apierrors.NewInternalError(errors.New("boom")), history.StatusUnknown, ErrClassInternal},
		{"deadline", &url.Error{Op: "Post", URL: "x", Err: context.DeadlineExceeded}, history.StatusUnknown, ErrClassTimeout},
		{"net timeout", timeoutErr, history.StatusUnknown, ErrClassTimeout},
		{"reset", &url.Error{Op: "Get", URL: "x", Err: errors.New("connection reset by peer")}, history.StatusUnknown, ErrClassTransport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, class := Outcome(tc.err)
			if status != tc.status || class != tc.class {
				t.Errorf("Outcome(%v) = %s %q, want %s %q", tc.err, status, class, tc.status, tc.class)
			}
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestPickGrace(t *testing.T) {
	for _, force := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		seen := map[int64]bool{}
		nils := 0
		for range 4000 {
			g := pickGrace(rng, 30, force)
			if g == nil {
				nils++
				continue
			}
			if *g < 0 || *g > 30 {
				t.Fatalf("force %v: grace %d outside 0..30", force, *g)
			}
			seen[*g] = true
		}
		if seen[0] != force {
			t.Errorf("force %v: grace 0 drawn = %v", force, seen[0])
		}
		if !seen[1] || !seen[30] {
			t.Errorf("force %v: the ends 1 and 30 were never drawn: %v", force, seen)
		}
		if nils < 800 || nils > 1200 {
			t.Errorf("force %v: %d of 4000 deletions use the pod's own grace, want about a quarter", force, nils)
		}
	}
}

func TestThinkTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var sum time.Duration
	const n = 10000
	for range n {
		d := thinkTime(rng, 10*time.Second, 5)
		if d < 0 || d >= 100*time.Second {
			t.Fatalf("think time %s outside [0, 100s)", d)
		}
		sum += d
	}
	// Five processes each waiting 50 s on average make one operation per
	// 10 s for the workload as a whole.
	if mean := sum / n; mean < 48*time.Second || mean > 52*time.Second {
		t.Errorf("mean think time %s, want about 50s", mean)
	}
	if d := thinkTime(rng, 0, 3); d != 0 {
		t.Errorf("think time with no interval = %s, want 0", d)
	}
}

func TestPickWeighted(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	counts := make([]int, 4)
	for range 6000 {
		counts[pickWeighted(rng, []int{1, 0, 2, -3})]++
	}
	if counts[1] != 0 || counts[3] != 0 {
		t.Errorf("zero and negative weights drawn: %v", counts)
	}
	if counts[2] < 3600 || counts[2] > 4400 {
		t.Errorf("weight 2 of 3 drawn %d of 6000 times", counts[2])
	}
	if got := pickWeighted(rng, []int{0, 0}); got != 0 {
		t.Errorf("all-zero weights gave %d, want 0", got)
	}
}

func TestOwnedSlotsPartition(t *testing.T) {
	for _, tc := range []struct{ slots, workers int }{{12, 5}, {3, 5}, {8, 1}, {0, 2}} {
		owner := map[int]int{}
		for w := range tc.workers {
			for _, j := range ownedSlots(tc.slots, w, tc.workers) {
				if prev, dup := owner[j]; dup {
					t.Errorf("%+v: slot %d owned by workers %d and %d", tc, j, prev, w)
				}
				owner[j] = w
			}
		}
		if len(owner) != tc.slots {
			t.Errorf("%+v: %d slots owned, want all %d", tc, len(owner), tc.slots)
		}
	}
}

func TestSetPlannerReadsThenCreates(t *testing.T) {
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "statefulsets"}, "db")
	pl := newSetPlanner(rand.New(rand.NewPCG(7, 8)), 3, 3, 30, false, [setVerbs]int{0, 1, 1, 1, 1})
	for range 60 {
		a := pl.next()
		switch pl.state[a.set] {
		case setUnseen:
			if a.verb != setGet {
				t.Fatalf("%v on a set the process has not looked at", a)
			}
			// Set 0 is missing, the others are there.
			if a.set == 0 {
				pl.observe(a, -1, notFound)
				continue
			}
		case setAbsent:
			if a.verb != setCreate {
				t.Fatalf("%v on a set found missing", a)
			}
		case setExists:
			if a.verb == setCreate {
				t.Fatalf("%v on an existing set with create weight 0", a)
			}
		}
		pl.observe(a, -1, nil)
	}
	if got := pl.state; !cmp.Equal(got, []setKnowledge{setExists, setExists, setExists}) {
		t.Errorf("set states %v after 60 ops", got)
	}
	// A set found missing is created again.
	pl.observe(setAction{verb: setScale, set: 1}, -1, notFound)
	if pl.state[1] != setAbsent || pl.replicas[1] != -1 {
		t.Errorf("set 1 is %v with replicas %d after a scale found it missing", pl.state[1], pl.replicas[1])
	}
}

func TestSetPlannerChoicesInRange(t *testing.T) {
	for _, force := range []bool{false, true} {
		pl := newSetPlanner(rand.New(rand.NewPCG(9, 10)), 4, 3, 30, force, [setVerbs]int{1, 3, 3, 2, 1})
		zero := false
		for range 2000 {
			a := pl.next()
			if a.set < 0 || a.set >= 4 {
				t.Fatalf("%v: set outside 0..3", a)
			}
			if a.replicas < 0 || a.replicas > 3 {
				t.Fatalf("%v: replicas outside 0..3", a)
			}
			if a.verb == setDeletePod {
				if a.ord < 0 || a.ord >= 3 {
					t.Fatalf("%v: ordinal outside 0..2", a)
				}
				if a.grace != nil && *a.grace == 0 {
					zero = true
				}
			}
			pl.observe(a, -1, nil)
		}
		if zero != force {
			t.Errorf("force %v: a grace-0 deletion was chosen = %v", force, zero)
		}
	}
}

func TestSetPlannerAimsAtExistingPets(t *testing.T) {
	pl := newSetPlanner(rand.New(rand.NewPCG(11, 12)), 1, 3, 30, false, [setVerbs]int{0, 0, 1, 0, 0})
	pl.observe(setAction{verb: setCreate, set: 0, replicas: 2}, -1, nil)
	for range 200 {
		if a := pl.next(); a.ord >= 2 {
			t.Fatalf("%v: ordinal beyond the 2 replicas written", a)
		}
	}
	pl.observe(setAction{verb: setGet, set: 0}, 1, nil)
	for range 200 {
		if a := pl.next(); a.ord != 0 {
			t.Fatalf("%v: ordinal beyond the 1 replica read", a)
		}
	}
}

// setSequence is the first n actions of a set planner from seed when every
// operation succeeds.
func setSequence(seed uint64, n int) []string {
	pl := newSetPlanner(rand.New(rand.NewPCG(seed, 1)), 3, 3, 30, false, [setVerbs]int{0, 3, 3, 2, 1})
	var out []string
	for range n {
		a := pl.next()
		out = append(out, a.String())
		pl.observe(a, -1, nil)
	}
	return out
}

// slotSequence is the first n actions of a slot planner from seed, with
// scaled time advancing 10 s per operation and every operation succeeding
// (a get finds the pod running when the process created it).
func slotSequence(seed uint64, n int) []string {
	pl := newSlotPlanner(rand.New(rand.NewPCG(seed, 1)), 12, 1, 3, time.Minute, 30, false, [4]int{3, 2, 1, 1})
	now := time.Unix(0, 0)
	var out []string
	for range n {
		a := pl.next(now)
		out = append(out, a.String())
		var pod *corev1.Pod
		if a.verb == slotGet && pl.state[a.slot] == slotLive {
			pod = &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		}
		pl.observe(a, now, pod, nil)
		now = now.Add(10 * time.Second)
	}
	return out
}

func TestPlannersDeterministic(t *testing.T) {
	for name, seq := range map[string]func(uint64, int) []string{"set": setSequence, "slot": slotSequence} {
		t.Run(name, func(t *testing.T) {
			a, b := seq(42, 200), seq(42, 200)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("same seed, different operations (-first +second):\n%s", diff)
			}
			if cmp.Equal(a, seq(43, 200)) {
				t.Error("seeds 42 and 43 chose the same 200 operations")
			}
		})
	}
}

func TestSlotPlannerLifecycle(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	t0 := time.Unix(1000, 0)
	newPL := func() *slotPlanner {
		return newSlotPlanner(rand.New(rand.NewPCG(13, 14)), 4, 0, 2, time.Minute, 30, false, [4]int{1, 0, 0, 0})
	}
	t.Run("owns every other slot", func(t *testing.T) {
		if got := newPL().owned; !cmp.Equal(got, []int{0, 2}) {
			t.Errorf("worker 0 of 2 owns %v, want [0 2]", got)
		}
	})
	t.Run("created pod is deleted when due", func(t *testing.T) {
		pl := newPL()
		a := pl.next(t0)
		if a.verb != slotCreate || a.lifetime < 30*time.Second || a.lifetime >= 90*time.Second {
			t.Fatalf("first action %v, want a create with a lifetime in [30s, 90s)", a)
		}
		pl.observe(a, t0, nil, nil)
		if got := pl.next(t0.Add(a.lifetime)); got.verb != slotDelete || got.slot != a.slot {
			t.Fatalf("at the end of its lifetime: %v, want delete %d", got, a.slot)
		}
	})
	t.Run("unknown create is read before anything else", func(t *testing.T) {
		pl := newPL()
		a := pl.next(t0)
		pl.observe(a, t0, nil, apierrors.NewTimeoutError("unknown", 0))
		if got := pl.next(t0); got.verb != slotGet || got.slot != a.slot {
			t.Fatalf("after an unknown create: %v, want get %d", got, a.slot)
		}
		pl.observe(slotAction{verb: slotGet, slot: a.slot}, t0, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, nil)
		if pl.state[a.slot] != slotLive || !pl.due[a.slot].Equal(t0.Add(time.Minute)) {
			t.Errorf("a pod read after an unknown create is %v due %s, want live with a fresh lifetime", pl.state[a.slot], pl.due[a.slot])
		}
	})
	t.Run("finished pod is deleted at once", func(t *testing.T) {
		pl := newPL()
		a := pl.next(t0)
		pl.observe(a, t0, nil, nil)
		pl.observe(slotAction{verb: slotGet, slot: a.slot}, t0, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, nil)
		if got := pl.next(t0); got.verb != slotDelete || got.slot != a.slot {
			t.Fatalf("after reading it Succeeded: %v, want delete %d", got, a.slot)
		}
	})
	t.Run("terminating or missing pod frees the slot", func(t *testing.T) {
		for name, read := range map[string]struct {
			pod *corev1.Pod
			err error
		}{
			"terminating": {pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}},
			"missing":     {},
			"not found":   {err: apierrors.NewNotFound(gr, "p")},
		} {
			pl := newPL()
			a := pl.next(t0)
			pl.observe(a, t0, nil, nil)
			pl.observe(slotAction{verb: slotGet, slot: a.slot}, t0, read.pod, read.err)
			if pl.state[a.slot] != slotAbsent {
				t.Errorf("%s: slot state %v, want absent", name, pl.state[a.slot])
			}
		}
	})
	t.Run("refused delete is retried", func(t *testing.T) {
		pl := newPL()
		a := pl.next(t0)
		pl.observe(a, t0, nil, nil)
		late := t0.Add(time.Hour)
		d := pl.next(late)
		pl.observe(d, late, nil, apierrors.NewForbidden(gr, "p", errors.New("PS-9")))
		if got := pl.next(late); got.verb != slotDelete || got.slot != a.slot {
			t.Fatalf("after a refused delete: %v, want delete %d again", got, a.slot)
		}
	})
	t.Run("a process without slots lists", func(t *testing.T) {
		pl := newSlotPlanner(rand.New(rand.NewPCG(1, 1)), 2, 4, 5, time.Minute, 30, false, [4]int{1, 1, 0, 0})
		for range 20 {
			if a := pl.next(t0); a.verb != slotList {
				t.Fatalf("%v by a process that owns no slot", a)
			}
		}
	})
}

func TestValidWeights(t *testing.T) {
	for _, tc := range []struct {
		w  []int
		ok bool
	}{{[]int{1, 0}, true}, {[]int{0, 0}, false}, {[]int{2, -1}, false}} {
		err := validWeights("x", tc.w)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidWorkload)) {
			t.Errorf("validWeights(%v) = %v, want ok %v", tc.w, err, tc.ok)
		}
	}
}

func TestPodSummary(t *testing.T) {
	pods := []corev1.Pod{
		{Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{Status: corev1.PodStatus{Phase: corev1.PodRunning}, ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}},
		{Status: corev1.PodStatus{Phase: corev1.PodPending}},
	}
	if got, want := podSummary(pods), "pods=3 pending=1 running=2 terminating=1"; got != want {
		t.Errorf("podSummary = %q, want %q", got, want)
	}
	if got := fmt.Sprint(graceValue(nil), " ", graceValue(ptrInt64(7))); got != "grace=default grace=7" {
		t.Errorf("graceValue = %q", got)
	}
}

func ptrInt64(v int64) *int64 { return &v }

func TestPickRegrace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	shorter, longer := 0, 0
	for i := range 3000 {
		first := ptr.To(1 + int64(i%300))
		if i%7 == 0 {
			first = nil
		}
		after, g := pickRegrace(rng, first, 300)
		if g < 1 || g > 300 {
			t.Fatalf("grace %d outside 1..300", g)
		}
		limit := time.Second
		if first != nil {
			if g == *first {
				t.Fatalf("second grace %d equals the first", g)
			}
			if g < *first {
				shorter++
				if g > max(*first/3, 1) {
					t.Fatalf("first %d: shorter grace %d above a third of it", *first, g)
				}
			} else {
				longer++
			}
			limit = max(limit, time.Duration(*first)*time.Second/4)
		}
		if after < 0 || after >= limit {
			t.Fatalf("first %v: delay %s outside [0, %s)", first, after, limit)
		}
	}
	if shorter < 1000 || longer < 1000 {
		t.Errorf("%d shorter, %d longer: want both often", shorter, longer)
	}
}

func TestSetPlannerRegrace(t *testing.T) {
	for _, pct := range []int{0, 100} {
		pl := newSetPlanner(rand.New(rand.NewPCG(5, 6)), 3, 3, 300, false, [setVerbs]int{0, 1, 1, 1, 1})
		pl.regrace = pct
		deletes := 0
		for range 500 {
			a := pl.next()
			if a.verb == setDeletePod {
				deletes++
				if a.regrace != (pct == 100) {
					t.Fatalf("regrace %d%%: %v", pct, a)
				}
				if a.regrace && (a.regraceGrace < 1 || a.regraceGrace > 300) {
					t.Fatalf("%v: second grace outside 1..300", a)
				}
			} else if a.regrace {
				t.Fatalf("%v: only deletions are followed by a second one", a)
			}
			pl.observe(a, -1, nil)
		}
		if deletes == 0 {
			t.Fatal("no deletion drawn")
		}
	}
}

// TestSetPlannerRollout: with Rollout at 100% every scale of a Deployment
// is a rollout, which leaves the replicas the planner knows alone; at 0%
// none is, and the planner draws the same operations as one that knows
// no rollouts (a seed's runs of the other set workloads do not change).
func TestSetPlannerRollout(t *testing.T) {
	plain := newSetPlanner(rand.New(rand.NewPCG(5, 6)), 3, 3, 30, false, [setVerbs]int{0, 1, 1, 1, 1})
	off := newSetPlanner(rand.New(rand.NewPCG(5, 6)), 3, 3, 30, false, [setVerbs]int{0, 1, 1, 1, 1})
	off.rollout = 0
	all := newSetPlanner(rand.New(rand.NewPCG(5, 6)), 3, 3, 30, false, [setVerbs]int{0, 1, 1, 1, 1})
	all.rollout = 100
	rollouts := 0
	for range 500 {
		a, b, c := plain.next(), off.next(), all.next()
		if a.String() != b.String() || b.rollout {
			t.Fatalf("rollout 0%%: %v, a planner without rollouts %v", b, a)
		}
		if c.verb == setScale {
			if !c.rollout {
				t.Fatalf("rollout 100%%: %v is no rollout", c)
			}
			rollouts++
			before := all.replicas[c.set]
			all.observe(c, -1, nil)
			if all.replicas[c.set] != before || all.state[c.set] != setExists {
				t.Fatalf("after %v: replicas %d (were %d), state %v", c, all.replicas[c.set], before, all.state[c.set])
			}
		} else {
			if c.rollout {
				t.Fatalf("%v: only a scale is a rollout", c)
			}
			all.observe(c, -1, nil)
		}
		plain.observe(a, -1, nil)
		off.observe(b, -1, nil)
	}
	if rollouts == 0 {
		t.Fatal("no rollout drawn")
	}
}
