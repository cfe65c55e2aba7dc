package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func gracePod(deletion, spec *int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionGracePeriodSeconds: deletion},
		Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: spec},
	}
}

func probeContainer(startup, liveness *int64) *corev1.Container {
	return &corev1.Container{Name: "c",
		StartupProbe:  &corev1.Probe{TerminationGracePeriodSeconds: startup},
		LivenessProbe: &corev1.Probe{TerminationGracePeriodSeconds: liveness}}
}

// TestContainerGracePeriod covers GP-1 as seed 003's killContainer has it.
func TestContainerGracePeriod(t *testing.T) {
	c := probeContainer(ptr.To[int64](7), ptr.To[int64](9))
	tests := []struct {
		name   string
		pod    *corev1.Pod
		c      *corev1.Container
		reason KillReason
		want   int64
	}{
		{"deletion grace wins over spec", gracePod(ptr.To[int64](5), ptr.To[int64](30)), c, ReasonDeletion, 5},
		{"deletion grace wins over probe", gracePod(ptr.To[int64](5), ptr.To[int64](30)), c, ReasonLiveness, 5},
		{"deletion grace 0 is taken as is", gracePod(ptr.To[int64](0), ptr.To[int64](30)), c, ReasonDeletion, 0},
		{"spec without deletion", gracePod(nil, ptr.To[int64](30)), c, ReasonDeletion, 30},
		{"startup probe value for startup kill", gracePod(nil, ptr.To[int64](30)), c, ReasonStartupProbe, 7},
		{"liveness probe value for liveness kill", gracePod(nil, ptr.To[int64](30)), c, ReasonLiveness, 9},
		{"probe without its own value uses spec", gracePod(nil, ptr.To[int64](30)), probeContainer(nil, nil), ReasonLiveness, 30},
		{"liveness value not used for startup kill", gracePod(nil, ptr.To[int64](30)), probeContainer(nil, ptr.To[int64](9)), ReasonStartupProbe, 30},
		{"probe value ignored without spec (minimum)", gracePod(nil, nil), c, ReasonLiveness, 2},
		{"nothing set: minimum 2 s", gracePod(nil, nil), &corev1.Container{}, ReasonDeletion, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ContainerGracePeriod(tt.pod, tt.c, tt.reason); got != tt.want {
				t.Errorf("ContainerGracePeriod = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestEffectiveGracePeriod covers GP-4 and GP-5 (calculateEffectiveGracePeriod
// of seed 003).
func TestEffectiveGracePeriod(t *testing.T) {
	tests := []struct {
		name        string
		current     int64
		pod         *corev1.Pod
		override    *int64
		want        int64
		wantChanged bool
	}{
		{"deletion grace when none under way", 0, gracePod(ptr.To[int64](30), ptr.To[int64](60)), nil, 30, false},
		{"shorter deletion grace shortens", 30, gracePod(ptr.To[int64](10), ptr.To[int64](60)), nil, 10, true},
		{"longer deletion grace never lengthens", 10, gracePod(ptr.To[int64](30), ptr.To[int64](60)), nil, 10, false},
		{"eviction override replaces spec (GP-4)", 0, gracePod(nil, ptr.To[int64](30)), ptr.To[int64](45), 45, false},
		{"eviction override wins when smaller", 0, gracePod(ptr.To[int64](30), nil), ptr.To[int64](5), 5, false},
		{"eviction override loses when larger", 0, gracePod(ptr.To[int64](5), nil), ptr.To[int64](30), 5, false},
		{"override shortens a termination under way", 20, gracePod(nil, ptr.To[int64](30)), ptr.To[int64](3), 3, true},
		{"nothing set falls back to spec", 0, gracePod(nil, ptr.To[int64](30)), nil, 30, false},
		{"zero deletion grace falls back to spec", 0, gracePod(ptr.To[int64](0), ptr.To[int64](30)), nil, 30, false},
		{"hard eviction 0 falls back to spec", 0, gracePod(nil, ptr.To[int64](30)), ptr.To[int64](0), 30, false},
		{"never below 1 s", 0, gracePod(ptr.To[int64](0), ptr.To[int64](0)), nil, 1, false},
		{"never below 1 s without spec", 0, gracePod(nil, nil), ptr.To[int64](0), 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := EffectiveGracePeriod(tt.current, tt.pod, tt.override)
			if got != tt.want || changed != tt.wantChanged {
				t.Errorf("EffectiveGracePeriod = %d, %v; want %d, %v", got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

// TestRuntimeGracePeriod covers GP-2 (preStop time subtracted) and GP-3 (at
// least 2 s after preStop).
func TestRuntimeGracePeriod(t *testing.T) {
	tests := []struct {
		grace   int64
		preStop time.Duration
		want    time.Duration
	}{
		{30, 0, 30 * time.Second},
		{30, 4 * time.Second, 26 * time.Second},
		{30, 29 * time.Second, 2 * time.Second},
		{30, 40 * time.Second, 2 * time.Second},
		{1, 0, 2 * time.Second},
		{0, 0, 2 * time.Second},
	}
	for _, tt := range tests {
		if got := RuntimeGracePeriod(tt.grace, tt.preStop); got != tt.want {
			t.Errorf("RuntimeGracePeriod(%d, %s) = %s, want %s", tt.grace, tt.preStop, got, tt.want)
		}
	}
}

// TestKillTimeline drives the termination schedule on a fake clock through
// every case of PS-4, LC-11, GP-2, GP-3 and GP-R: TERM after preStop or at
// the grace deadline (a hook still running then is abandoned), KILL at
// max(deadline, TERM + 2 s), so never later than the deadline + 2 s; a
// shorter grace shortens, a longer one never lengthens.
func TestKillTimeline(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const hang = -1
	type step struct {
		preStop  time.Duration // how long the hook runs; hang: forever
		shorten  int64         // a later grace arriving at shortAt (0: none)
		shortAt  time.Duration
		wantTerm time.Duration // TERM at t0+wantTerm
		wantKill time.Duration // KILL at t0+wantKill
	}
	s := time.Second
	tests := []struct {
		name       string
		grace      int64
		hasPreStop bool
		step
	}{
		{"no preStop: KILL at the deadline", 30, false, step{wantTerm: 0, wantKill: 30 * s}},
		{"preStop time is subtracted", 30, true, step{preStop: 4 * s, wantTerm: 4 * s, wantKill: 30 * s}},
		{"2 s window after a long preStop", 30, true, step{preStop: 29 * s, wantTerm: 29 * s, wantKill: 31 * s}},
		{"preStop ending at the deadline", 10, true, step{preStop: 10 * s, wantTerm: 10 * s, wantKill: 12 * s}},
		// LC-11: the one 2 s extension is the window after TERM.
		{"hanging preStop: TERM at the deadline, KILL 2 s later", 10, true, step{preStop: hang, wantTerm: 10 * s, wantKill: 12 * s}},
		{"preStop ending between deadline and deadline + 2 s is abandoned", 10, true, step{preStop: 11 * s, wantTerm: 10 * s, wantKill: 12 * s}},
		{"grace 1 still gets the 2 s window", 1, true, step{preStop: 0, wantTerm: 0, wantKill: 2 * s}},
		{"grace 1 with a hanging preStop", 1, true, step{preStop: hang, wantTerm: 1 * s, wantKill: 3 * s}},
		{"shorter grace mid-way shortens", 30, false, step{shorten: 10, shortAt: 5 * s, wantTerm: 0, wantKill: 10 * s}},
		{"shorter grace below TERM+2s keeps the window", 30, false, step{shorten: 1, shortAt: 5 * s, wantTerm: 0, wantKill: 5 * s}},
		{"longer grace never lengthens", 10, false, step{shorten: 60, shortAt: 5 * s, wantTerm: 0, wantKill: 10 * s}},
		{"shorter grace cuts a hanging preStop", 30, true, step{preStop: hang, shorten: 5, shortAt: 1 * s, wantTerm: 5 * s, wantKill: 7 * s}},
		{"shorter grace past the deadline ends a hanging preStop at once", 30, true, step{preStop: hang, shorten: 5, shortAt: 8 * s, wantTerm: 8 * s, wantKill: 10 * s}},
		{"grace shortened to 1 during a hanging preStop", 30, true, step{preStop: hang, shorten: 1, shortAt: 500 * time.Millisecond, wantTerm: 1 * s, wantKill: 3 * s}},
		{"longer grace never lengthens a hanging preStop", 10, true, step{preStop: hang, shorten: 60, shortAt: 5 * s, wantTerm: 10 * s, wantKill: 12 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			tl := NewKillTimeline(clk.Now(), tt.grace, tt.hasPreStop)
			if tt.shorten != 0 && tt.shortAt == 0 {
				t.Fatal("bad table: shortAt")
			}
			shortened := false
			applyShorten := func() {
				if tt.shorten != 0 && !shortened && !clk.Now().Before(t0.Add(tt.shortAt)) {
					tl.Shorten(tt.shorten)
					shortened = true
				}
			}
			// Advance in 100 ms steps, as a kubelet's timers would fire.
			tick := 100 * time.Millisecond
			if tl.RunPreStop {
				for {
					applyShorten()
					if tt.preStop != hang && !clk.Now().Before(t0.Add(tt.preStop)) {
						break
					}
					if tl.PreStopExpired(clk.Now()) {
						break
					}
					clk.Step(tick)
				}
			}
			tl.Termed(clk.Now())
			for {
				applyShorten()
				if !clk.Now().Before(tl.KillAt()) {
					break
				}
				clk.Step(tick)
			}
			if got := tl.TermAt.Sub(t0); got != tt.wantTerm {
				t.Errorf("TERM at +%s, want +%s", got, tt.wantTerm)
			}
			if got := clk.Now().Sub(t0); got != tt.wantKill {
				t.Errorf("KILL at +%s, want +%s", got, tt.wantKill)
			}
			// The lower bound every checker enforces (GP-R) ...
			if kill, bound := clk.Now(), tl.TermAt.Add(MinimumGracePeriodSeconds*time.Second); kill.Before(bound) {
				t.Errorf("KILL %s before TERM + 2 s %s", kill, bound)
			}
			// ... and the upper one (LC-11): TERM by the deadline, KILL by
			// the deadline + 2 s, or by the shortening when it came later.
			latest := tl.Deadline()
			if tt.shorten != 0 && t0.Add(tt.shortAt).After(latest) {
				latest = t0.Add(tt.shortAt)
			}
			if tl.TermAt.After(latest) || clk.Now().After(latest.Add(PreStopExtension)) {
				t.Errorf("TERM +%s, KILL +%s: later than +%s and +%s + %s", tl.TermAt.Sub(t0), clk.Now().Sub(t0),
					latest.Sub(t0), latest.Sub(t0), PreStopExtension)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	var b Backoff
	var got []time.Duration
	for range 8 {
		got = append(got, b.Next(time.Second))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delays = %v, want %v", got, want)
		}
	}
	if d := b.Next(10 * time.Minute); d != BackoffInitial {
		t.Errorf("after a 10 min run the delay is %s, want %s", d, BackoffInitial)
	}
	if d := b.Next(9 * time.Minute); d != 20*time.Second {
		t.Errorf("then %s, want 20s", d)
	}
}

func TestShouldRestart(t *testing.T) {
	tests := []struct {
		policy string
		code   int
		want   bool
	}{
		{"Always", 0, true}, {"Always", 1, true}, {"", 0, true},
		{"OnFailure", 0, false}, {"OnFailure", 137, true},
		{"Never", 0, false}, {"Never", 1, false},
	}
	for _, tt := range tests {
		if got := shouldRestart(tt.policy, tt.code); got != tt.want {
			t.Errorf("shouldRestart(%q, %d) = %v, want %v", tt.policy, tt.code, got, tt.want)
		}
	}
}

func TestParseScript(t *testing.T) {
	s, err := ParseScript("run=5s exit=3 ignore-term stop-after-term=2s prestop=hang liveness-fail-at=20s ready-after=1s")
	if err != nil {
		t.Fatal(err)
	}
	if s.Forever || s.Run != 5*time.Second || s.Exit != 3 || !s.IgnoreTerm || s.StopAfterTerm != 2*time.Second ||
		!s.HasPreStop || !s.PreStopHang || s.LivenessFail != 20*time.Second || s.ReadyAfter != time.Second {
		t.Errorf("parsed %+v", s)
	}
	if s, _ := ParseScript("crash-loop"); s.Forever || s.Run != time.Second || s.Exit != 1 {
		t.Errorf("crash-loop parsed %+v", s)
	}
	if s, _ := ParseScript(""); !s.Forever || s.HasPreStop {
		t.Errorf("empty parsed %+v", s)
	}
	for _, bad := range []string{"run=x", "exit=300", "bogus", "prestop"} {
		if _, err := ParseScript(bad); err == nil {
			t.Errorf("ParseScript(%q) accepted", bad)
		}
	}
	if got := s.probe(ProbeLiveness, 21*time.Second); got != ProbeFailure {
		t.Errorf("liveness at 21s = %s", got)
	}
}
