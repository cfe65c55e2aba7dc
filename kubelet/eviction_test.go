package kubelet

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRankForEviction(t *testing.T) {
	const mi = 1 << 20
	cand := func(name string, usage, request int64, prio int32) EvictionCandidate {
		return EvictionCandidate{Name: name, Usage: usage * mi, Request: request * mi, Priority: prio}
	}
	cases := []struct {
		name string
		in   []EvictionCandidate
		want []string
	}{
		{"within requests are never evicted",
			[]EvictionCandidate{cand("a", 100, 100, 0), cand("b", 50, 200, 0)}, nil},
		{"only those above requests",
			[]EvictionCandidate{cand("a", 100, 100, 0), cand("b", 300, 200, 0)}, []string{"b"}},
		{"lower priority first",
			[]EvictionCandidate{cand("hi", 900, 0, 1000), cand("lo", 101, 100, 10)}, []string{"lo", "hi"}},
		{"same priority: more above requests first",
			[]EvictionCandidate{cand("small", 150, 100, 0), cand("big", 500, 100, 0), cand("mid", 300, 100, 0)},
			[]string{"big", "mid", "small"}},
		{"above requests, not usage, decides",
			[]EvictionCandidate{cand("heavy", 1000, 950, 0), cand("light", 200, 0, 0)}, []string{"light", "heavy"}},
		{"ties by name",
			[]EvictionCandidate{cand("b", 200, 100, 0), cand("a", 200, 100, 0)}, []string{"a", "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range RankForEviction(tc.in) {
				got = append(got, c.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSimRuntimeMemoryUsage(t *testing.T) {
	rt := NewSimRuntime("n", nil, nil)
	defer rt.Close()
	ctx := context.Background()
	start := func(name, script string) ContainerID {
		id, err := rt.Start(ctx, ContainerConfig{UID: "u1", Container: corev1.Container{Name: name},
			Annotations: map[string]string{ScriptAnnotationPrefix + name: script}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	start("a", "mem=200Mi")
	start("b", "mem=1Gi")
	done := start("c", "mem=5Gi run=0s")
	if _, err := rt.Wait(ctx, done); err != nil {
		t.Fatal(err)
	}
	usage, err := rt.MemoryUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, u := range usage {
		total += u.Bytes
	}
	if want := int64(200<<20 + 1<<30); total != want {
		t.Errorf("usage of running containers %d, want %d (%+v)", total, want, usage)
	}
	if _, err := ParseScript("mem=lots"); err == nil {
		t.Errorf("mem=lots parsed")
	}
	if _, err := ParseScript("mem=-1Mi"); err == nil {
		t.Errorf("mem=-1Mi parsed")
	}
	// A container may use no memory at all.
	if sc, err := ParseScript("mem=0"); err != nil || sc.Memory != 0 {
		t.Errorf("mem=0: %+v, %v", sc, err)
	}
}

// stuckRuntime is a runtime whose containers use fixed memory and die only
// when the test says so: it never confirms a kill by itself. Only what
// eviction uses is implemented.
type stuckRuntime struct {
	mu   sync.Mutex
	ctrs map[ContainerID]*stuckContainer
}

type stuckContainer struct {
	uid   string
	bytes int64
	done  chan struct{}
}

var (
	_ Runtime        = (*stuckRuntime)(nil)
	_ MemoryReporter = (*stuckRuntime)(nil)
)

func newStuckRuntime() *stuckRuntime { return &stuckRuntime{ctrs: map[ContainerID]*stuckContainer{}} }

// run starts a container of pod uid using bytes.
func (r *stuckRuntime) run(uid string, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctrs[ContainerID(uid+"-"+strconv.Itoa(len(r.ctrs)))] = &stuckContainer{uid: uid, bytes: bytes, done: make(chan struct{})}
}

// exit ends every container of pod uid.
func (r *stuckRuntime) exit(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, c := range r.ctrs {
		if c.uid == uid {
			close(c.done)
			delete(r.ctrs, id)
		}
	}
}

func (r *stuckRuntime) Start(context.Context, ContainerConfig) (ContainerID, error) {
	return "", errors.New("stuckRuntime starts nothing")
}

func (r *stuckRuntime) Signal(context.Context, ContainerID, Signal, int64, KillReason) error {
	return nil
}

func (r *stuckRuntime) PreStop(context.Context, ContainerID, KillReason) (<-chan error, error) {
	return nil, errors.New("no hooks")
}

func (r *stuckRuntime) Probe(context.Context, ContainerID, ProbeKind) (ProbeResult, error) {
	return ProbeSuccess, nil
}

func (r *stuckRuntime) Wait(ctx context.Context, id ContainerID) (ContainerStatus, error) {
	r.mu.Lock()
	c := r.ctrs[id]
	r.mu.Unlock()
	if c == nil {
		return ContainerStatus{}, ErrNoContainer
	}
	select {
	case <-c.done:
		return ContainerStatus{ID: id, UID: c.uid}, nil
	case <-ctx.Done():
		return ContainerStatus{}, ctx.Err()
	}
}

func (r *stuckRuntime) List(context.Context) ([]ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ContainerStatus
	for id, c := range r.ctrs {
		out = append(out, ContainerStatus{ID: id, UID: c.uid, Running: true})
	}
	return out, nil
}

func (r *stuckRuntime) Remove(context.Context, ContainerID) error { return nil }

func (r *stuckRuntime) MemoryUsage(context.Context) ([]ContainerMemory, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ContainerMemory
	for _, c := range r.ctrs {
		out = append(out, ContainerMemory{UID: c.uid, Bytes: c.bytes})
	}
	return out, nil
}

var evictionTestStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newEvictionKubelet returns a kubelet on a fake clock and a fake API that is
// not running: tests drive evictOnce and syncNode themselves.
func newEvictionKubelet(t *testing.T, rt Runtime, adjust func(*Config)) (*Kubelet, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(evictionTestStart)
	cfg := Config{Client: fake.NewClientset(), NodeName: "node-0", Runtime: rt, Clock: clk}
	adjust(&cfg)
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k, clk
}

// addPod gives k a worker for a running pod with one container that uses
// mem MiB and requests request MiB.
func addPod(k *Kubelet, rt *stuckRuntime, name string, mem, request int64, priority int32) *podWorker {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: "node-0", Priority: &priority, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceMemory: *resource.NewQuantity(request<<20, resource.BinarySI)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	w := newPodWorker(k, pod.UID, pod.Namespace, pod.Name, nil)
	w.update(pod)
	k.mu.Lock()
	k.workers[pod.UID] = w
	k.mu.Unlock()
	rt.run(name, mem<<20)
	return w
}

// evictRequest returns the eviction grace asked of w, or nil.
func evictRequest(w *podWorker) *int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evictReq
}

// eventually polls cond: the goroutine under test is not on the fake clock's
// schedule, so the test waits for it to get there.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func TestEvictionKillTimeout(t *testing.T) {
	for grace, want := range map[int64]time.Duration{
		0: 10 * time.Second, 1: 10 * time.Second, 6: 10 * time.Second, 7: 10500 * time.Millisecond,
		30: 45 * time.Second, 300: 450 * time.Second,
	} {
		if got := EvictionKillTimeout(grace); got != want {
			t.Errorf("EvictionKillTimeout(%d) = %v, want max(10 s, 1.5 × grace) = %v", grace, got, want)
		}
	}
}

// TestEvictionWaitsBoundedForKill is GP-7 on a runtime that never confirms
// the kill: the eviction waits exactly max(10 s, 1.5 × grace) of kubelet
// clock time, then gives up on that pod and evicts the next candidate, whose
// confirmed kill ends the look.
func TestEvictionWaitsBoundedForKill(t *testing.T) {
	cases := []struct {
		name    string
		cfg     func(*Config)
		grace   int64
		timeout time.Duration
	}{
		{"hard: grace 0", func(c *Config) { c.EvictionHard = 1 << 30 }, 0, 10 * time.Second},
		{"soft: grace 4", func(c *Config) { c.EvictionSoft, c.EvictionMaxPodGracePeriod = 1<<30, 4 }, 4, 10 * time.Second},
		{"soft: grace 30", func(c *Config) { c.EvictionSoft, c.EvictionMaxPodGracePeriod = 1<<30, 30 }, 30, 45 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newStuckRuntime()
			k, clk := newEvictionKubelet(t, rt, tc.cfg)
			first := addPod(k, rt, "first", 600, 100, 0)
			next := addPod(k, rt, "next", 600, 100, 10)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				k.evictOnce(ctx, rt)
			}()
			eventually(t, "first evicted and waiting", func() bool { return evictRequest(first) != nil && clk.HasWaiters() })
			if g := *evictRequest(first); g != tc.grace {
				t.Errorf("first evicted with grace %d, want %d", g, tc.grace)
			}
			clk.Step(tc.timeout - time.Millisecond)
			// Step fires due timers before it returns, and a new wait
			// begins only after the next pod is evicted: a waiter now with
			// next untouched is the first wait, still going.
			if !clk.HasWaiters() || evictRequest(next) != nil {
				t.Fatalf("gave up on the first kill before %v", tc.timeout)
			}
			clk.Step(time.Millisecond)
			eventually(t, "next evicted after the timeout", func() bool { return evictRequest(next) != nil && clk.HasWaiters() })
			rt.exit("next")
			<-done // the confirmed kill ends the look
		})
	}
}

// TestEvictionStopsAtConfirmedKill: a kill confirmed in time ends the look;
// nothing else is evicted.
func TestEvictionStopsAtConfirmedKill(t *testing.T) {
	rt := newStuckRuntime()
	k, clk := newEvictionKubelet(t, rt, func(c *Config) { c.EvictionHard = 1 << 30 })
	first := addPod(k, rt, "first", 600, 100, 0)
	next := addPod(k, rt, "next", 600, 100, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.evictOnce(context.Background(), rt)
	}()
	eventually(t, "first evicted and waiting", func() bool { return evictRequest(first) != nil && clk.HasWaiters() })
	clk.Step(9 * time.Second)
	rt.exit("first")
	<-done
	if evictRequest(next) != nil {
		t.Errorf("the next pod was evicted after the first one's kill was confirmed")
	}
}

// TestSoftEvictionGracePeriod: soft pressure evicts only once it has lasted
// EvictionSoftGracePeriod on the kubelet clock; dropping below the threshold
// starts the period over. MemoryPressure is reported from the first look.
func TestSoftEvictionGracePeriod(t *testing.T) {
	rt := newStuckRuntime()
	k, clk := newEvictionKubelet(t, rt, func(c *Config) {
		c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMaxPodGracePeriod = 1<<30, 10*time.Second, 5
	})
	greedy := addPod(k, rt, "greedy", 800, 100, 0)
	addPod(k, rt, "within", 300, 300, 0)
	look := func(want bool) {
		t.Helper()
		k.evictOnce(context.Background(), rt) // nothing evicted: returns at once
		if pressure, _ := k.mem.current(); pressure != want {
			t.Errorf("at %v: pressure %v, want %v", clk.Since(evictionTestStart), pressure, want)
		}
		if evictRequest(greedy) != nil {
			t.Fatalf("evicted at %v, within the soft grace period", clk.Since(evictionTestStart))
		}
	}
	look(true)
	clk.Step(9 * time.Second)
	look(true)
	rt.exit("within") // below the threshold: the period starts over
	clk.Step(time.Second)
	look(false)
	rt.run("within", 300<<20)
	clk.Step(time.Second)
	look(true)
	clk.Step(10*time.Second - time.Millisecond)
	look(true)
	clk.Step(time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.evictOnce(context.Background(), rt)
	}()
	eventually(t, "greedy evicted", func() bool { return evictRequest(greedy) != nil })
	if g := *evictRequest(greedy); g != 5 {
		t.Errorf("soft eviction grace %d, want EvictionMaxPodGracePeriod 5", g)
	}
	rt.exit("greedy")
	<-done
}

func TestMemoryPressureCondition(t *testing.T) {
	t0 := evictionTestStart
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	cond := func(status corev1.ConditionStatus, transition time.Time) *corev1.NodeCondition {
		return &corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: status, LastTransitionTime: metav1.NewTime(transition)}
	}
	cases := []struct {
		name           string
		old            *corev1.NodeCondition
		pressure       bool
		since          time.Time
		wantStatus     corev1.ConditionStatus
		wantReason     string
		wantTransition time.Time
	}{
		{"first report, never looked", nil, false, time.Time{}, corev1.ConditionFalse, ReasonSufficientMemory, t2},
		{"first report under pressure", nil, true, t1, corev1.ConditionTrue, ReasonInsufficientMemory, t1},
		{"unchanged keeps the transition", cond(corev1.ConditionTrue, t0), true, t1, corev1.ConditionTrue, ReasonInsufficientMemory, t0},
		{"pressure gone", cond(corev1.ConditionTrue, t0), false, t1, corev1.ConditionFalse, ReasonSufficientMemory, t1},
		{"came and went unreported", cond(corev1.ConditionFalse, t0), false, t1, corev1.ConditionFalse, ReasonSufficientMemory, t0},
		{"a restarted kubelet corrects the node", cond(corev1.ConditionTrue, t0), false, time.Time{}, corev1.ConditionFalse, ReasonSufficientMemory, t2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := memoryPressureCondition(tc.old, tc.pressure, tc.since, t2)
			want := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: tc.wantStatus, Reason: tc.wantReason,
				Message: got.Message, LastHeartbeatTime: metav1.NewTime(t2), LastTransitionTime: metav1.NewTime(tc.wantTransition)}
			if diff := cmp.Diff(want, got); diff != "" || got.Message == "" {
				t.Errorf("condition (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeReportsMemoryPressure: the node status the kubelet posts carries
// MemoryPressure from its looks at memory, with the transition time of the
// look that saw the change, beside Ready.
func TestNodeReportsMemoryPressure(t *testing.T) {
	rt := newStuckRuntime()
	k, clk := newEvictionKubelet(t, rt, func(c *Config) { c.EvictionHard = 1 << 30 })
	ctx := context.Background()
	addPod(k, rt, "a", 700, 700, 0) // within requests: pressure, but no eviction
	addPod(k, rt, "b", 700, 700, 0)
	post := func() map[corev1.NodeConditionType]corev1.NodeCondition {
		t.Helper()
		if err := k.syncNode(ctx); err != nil {
			t.Fatal(err)
		}
		node, err := k.cfg.Client.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[corev1.NodeConditionType]corev1.NodeCondition{}
		for _, c := range node.Status.Conditions {
			out[c.Type] = c
		}
		return out
	}
	check := func(conds map[corev1.NodeConditionType]corev1.NodeCondition, status corev1.ConditionStatus, reason string, transition time.Time) {
		t.Helper()
		c := conds[corev1.NodeMemoryPressure]
		if c.Status != status || c.Reason != reason || !c.LastTransitionTime.Time.Equal(transition) ||
			!c.LastHeartbeatTime.Time.Equal(clk.Now()) {
			t.Errorf("at %v: MemoryPressure %+v, want %s %s since %v", clk.Since(evictionTestStart), c, status, reason, transition)
		}
		if conds[corev1.NodeReady].Status != corev1.ConditionTrue {
			t.Errorf("Ready condition %+v", conds[corev1.NodeReady])
		}
	}
	check(post(), corev1.ConditionFalse, ReasonSufficientMemory, evictionTestStart)
	clk.Step(10 * time.Second)
	seen := clk.Now()
	k.evictOnce(ctx, rt)
	select {
	case <-k.mem.changes():
	default:
		t.Errorf("no node status wake-up after pressure began")
	}
	clk.Step(time.Second)
	check(post(), corev1.ConditionTrue, ReasonInsufficientMemory, seen)
	clk.Step(10 * time.Second)
	k.evictOnce(ctx, rt)
	check(post(), corev1.ConditionTrue, ReasonInsufficientMemory, seen)
	rt.exit("b")
	clk.Step(10 * time.Second)
	gone := clk.Now()
	k.evictOnce(ctx, rt)
	clk.Step(time.Second)
	check(post(), corev1.ConditionFalse, ReasonSufficientMemory, gone)
}

// TestMemoryPressureChangeLogged: the log line of a pressure change says
// whether there is pressure now, whichever threshold is crossed.
func TestMemoryPressureChangeLogged(t *testing.T) {
	changed := regexp.MustCompile(`msg="memory pressure changed" .* pressure=(\w+)`)
	cases := []struct {
		name string
		cfg  func(*Config)
	}{
		{"hard threshold only", func(c *Config) { c.EvictionHard = 1 << 30 }},
		{"above soft, below hard", func(c *Config) {
			c.EvictionHard, c.EvictionSoft, c.EvictionSoftGracePeriod = 2<<30, 1<<30, time.Hour
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			rt := newStuckRuntime()
			k, clk := newEvictionKubelet(t, rt, func(c *Config) {
				tc.cfg(c)
				c.Logger = slog.New(slog.NewTextHandler(&log, nil))
			})
			addPod(k, rt, "a", 700, 700, 0) // within requests: pressure, but no eviction
			addPod(k, rt, "b", 700, 700, 0)
			k.evictOnce(context.Background(), rt)
			rt.exit("b")
			clk.Step(10 * time.Second)
			k.evictOnce(context.Background(), rt)
			var got []string
			for _, m := range changed.FindAllStringSubmatch(log.String(), -1) {
				got = append(got, m[1])
			}
			if diff := cmp.Diff([]string{"true", "false"}, got); diff != "" {
				t.Errorf("pressure logged at its changes (-want +got):\n%s\nlog:\n%s", diff, log.String())
			}
		})
	}
}

// TestPressureNeverLostBetweenPosts: a memory pressure that began and ended
// between two node status posts is still posted once, with the time it
// began, and the post after it (asked for at once) carries the current
// state; pressure already posted, or never seen, is posted as it is.
func TestPressureNeverLostBetweenPosts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var p memoryPressure
	ch := p.changes()
	if pressure, _, stale := p.toPost(); pressure || stale {
		t.Fatalf("before any pressure: post %v (stale %v), want false", pressure, stale)
	}
	p.observe(true, false, t0)
	p.observe(false, false, t0.Add(2*time.Second))
	<-ch // the two changes, coalesced into one signal
	pressure, since, stale := p.toPost()
	if !pressure || !stale || !since.Equal(t0) {
		t.Fatalf("pressure seen and gone before a post: post %v since %v (stale %v), want true since %v, stale", pressure, since, stale, t0)
	}
	p.posted(pressure, stale)
	select {
	case <-ch:
	default:
		t.Fatal("after posting a stale pressure, no post of the current state was asked for")
	}
	pressure, since, stale = p.toPost()
	if pressure || stale || !since.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("after the stale post: post %v since %v (stale %v), want false since %v", pressure, since, stale, t0.Add(2*time.Second))
	}
	p.posted(pressure, stale)
	select {
	case <-ch:
		t.Fatal("a post of the current state asked for another")
	default:
	}

	// Pressure posted while it lasts is not posted again once gone.
	p.observe(true, false, t0.Add(10*time.Second))
	if pressure, _, stale := p.toPost(); !pressure || stale {
		t.Fatalf("under pressure: post %v (stale %v), want true, current", pressure, stale)
	}
	p.posted(true, false)
	p.observe(false, false, t0.Add(12*time.Second))
	if pressure, _, stale := p.toPost(); pressure || stale {
		t.Fatalf("pressure posted, then gone: post %v (stale %v), want false", pressure, stale)
	}
}

// TestRunEvictionThresholds: the eviction loop runs when either threshold
// is set (hard alone evicts at its next look) and not at all without one.
func TestRunEvictionThresholds(t *testing.T) {
	rt := newStuckRuntime()
	k, clk := newEvictionKubelet(t, rt, func(c *Config) { c.EvictionHard = 1 << 30 })
	first := addPod(k, rt, "first", 600, 100, 0)
	addPod(k, rt, "next", 600, 100, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.runEviction(ctx)
	}()
	eventually(t, "the loop waits for its first look", clk.HasWaiters)
	clk.Step(DefaultEvictionEvery)
	eventually(t, "first evicted at the first look, hard threshold alone", func() bool { return evictRequest(first) != nil })
	cancel()
	rt.exit("first")
	<-done

	none, _ := newEvictionKubelet(t, newStuckRuntime(), func(*Config) {})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		none.runEviction(context.Background())
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("with no threshold the eviction loop ran")
	}
}
