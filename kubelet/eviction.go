package kubelet

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultEvictionEvery is how often memory pressure is looked at (clock
// time) when Config.EvictionEvery is zero.
const DefaultEvictionEvery = 10 * time.Second

// ReasonEvicted is the pod status reason of an evicted pod.
const ReasonEvicted = "Evicted"

// ContainerMemory is the memory one running container uses.
type ContainerMemory struct {
	UID       string
	Container string
	Bytes     int64
}

// MemoryReporter is a Runtime that reports its running containers' memory
// use; the kubelet evicts under memory pressure (PR-14, GP-7) only on such a
// runtime.
type MemoryReporter interface {
	MemoryUsage(ctx context.Context) ([]ContainerMemory, error)
}

// EvictionCandidate is one pod as eviction ranks it.
type EvictionCandidate struct {
	UID      types.UID
	Name     string
	Usage    int64 // bytes its running containers use
	Request  int64 // the sum of its containers' memory requests
	Priority int32
}

// RankForEviction is PR-14's order: only pods using more memory than they
// request are candidates; lower priority goes first, then more usage above
// requests, then the name. It is pure; the input is not modified.
func RankForEviction(pods []EvictionCandidate) []EvictionCandidate {
	var out []EvictionCandidate
	for _, p := range pods {
		if p.Usage > p.Request {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b EvictionCandidate) int {
		return cmp.Or(
			cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(b.Usage-b.Request, a.Usage-a.Request),
			cmp.Compare(a.Name, b.Name))
	})
	return out
}

// memoryRequest sums the memory requests of a pod's app containers.
func memoryRequest(pod *corev1.Pod) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			n += q.Value()
		}
	}
	return n
}

// runEviction looks at memory every EvictionEvery: it keeps the node's
// MemoryPressure condition and evicts under pressure (see evictOnce).
func (k *Kubelet) runEviction(ctx context.Context) {
	mr, ok := k.rt.(MemoryReporter)
	if !ok || (k.cfg.EvictionHard <= 0 && k.cfg.EvictionSoft <= 0) {
		return
	}
	for {
		t := k.clock.NewTimer(k.cfg.EvictionEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		k.evictOnce(ctx, mr)
	}
}

// evictOnce looks at memory once. It records whether the containers use
// more than a threshold (the node's MemoryPressure), and evicts the first
// pod RankForEviction names: above EvictionHard with grace 0, above
// EvictionSoft, once it has been so for EvictionSoftGracePeriod, with
// EvictionMaxPodGracePeriod (GP-7). It then waits for the kill to be
// confirmed, at most EvictionKillTimeout; a kill not confirmed by then is
// given up on and the next candidate is evicted, as the kubelet's eviction
// manager does when killPodNow times out.
func (k *Kubelet) evictOnce(ctx context.Context, mr MemoryReporter) {
	usage, err := mr.MemoryUsage(ctx)
	if err != nil {
		k.log.Debug("memory usage unknown", "err", err)
		return
	}
	var total int64
	byPod := map[types.UID]int64{}
	for _, u := range usage {
		total += u.Bytes
		byPod[types.UID(u.UID)] += u.Bytes
	}
	now := k.clock.Now()
	hard := k.cfg.EvictionHard > 0 && total > k.cfg.EvictionHard
	soft := k.cfg.EvictionSoft > 0 && total > k.cfg.EvictionSoft
	changed, softFor := k.mem.observe(hard || soft, soft, now)
	if changed {
		k.log.Info("memory pressure changed", "pressure", hard || soft, "memory", total)
	}
	var grace int64
	switch {
	case hard:
		grace = 0
	case soft && softFor >= k.cfg.EvictionSoftGracePeriod:
		grace = k.cfg.EvictionMaxPodGracePeriod
	default:
		return
	}
	k.mu.Lock()
	var cands []EvictionCandidate
	workers := map[types.UID]*podWorker{}
	for uid, w := range k.workers {
		pod, evictable := w.evictable()
		if !evictable {
			continue
		}
		workers[uid] = w
		c := EvictionCandidate{UID: uid, Name: pod.Namespace + "/" + pod.Name, Usage: byPod[uid], Request: memoryRequest(pod)}
		if pod.Spec.Priority != nil {
			c.Priority = *pod.Spec.Priority
		}
		cands = append(cands, c)
	}
	k.mu.Unlock()
	for _, v := range RankForEviction(cands) {
		w := workers[v.UID]
		if _, evictable := w.evictable(); !evictable {
			continue // deleted or finished meanwhile
		}
		k.log.Info("evicting pod", "pod", v.Name, "memory", total, "usage", v.Usage, "request", v.Request, "grace", grace)
		w.evict(grace)
		k.evictedEvent(w.evictPod())
		if k.awaitKill(ctx, v.UID, grace) || ctx.Err() != nil {
			return
		}
		k.log.Warn("evicted pod not confirmed killed in time; evicting the next", "pod", v.Name,
			"timeout", EvictionKillTimeout(grace))
	}
}

// MinEvictionKillTimeout is GP-7's least wait for an evicted pod's kill to be
// confirmed, meant to cover the kubelet → runtime round trip of KILL.
const MinEvictionKillTimeout = 10 * time.Second

// EvictionKillTimeout is GP-7's bound on how long the eviction of a pod with
// grace seconds waits for the kill to be confirmed: max(10 s, 1.5 × grace).
// It is pure.
func EvictionKillTimeout(grace int64) time.Duration {
	return max(MinEvictionKillTimeout, time.Duration(grace)*time.Second*3/2)
}

// awaitKill waits, at most EvictionKillTimeout(grace) of clock time, until
// the runtime runs no container of pod uid, and reports whether it saw that.
func (k *Kubelet) awaitKill(ctx context.Context, uid types.UID, grace int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone := make(chan struct{})
	go func() {
		if k.waitContainersGone(wctx, uid) == nil {
			close(gone)
		}
	}()
	t := k.clock.NewTimer(EvictionKillTimeout(grace))
	defer t.Stop()
	select {
	case <-gone:
		return true
	case <-ctx.Done():
		return false
	case <-t.C():
		return false
	}
}

// waitContainersGone returns nil once the runtime lists no running container
// of pod uid: the runtime's own confirmation that the kill is done.
func (k *Kubelet) waitContainersGone(ctx context.Context, uid types.UID) error {
	for {
		cs, err := k.rt.List(ctx)
		if err != nil {
			return err
		}
		var running []ContainerID
		for _, c := range cs {
			if types.UID(c.UID) == uid && c.Running {
				running = append(running, c.ID)
			}
		}
		if len(running) == 0 {
			return nil
		}
		for _, id := range running {
			if _, err := k.rt.Wait(ctx, id); err != nil && !errors.Is(err, ErrNoContainer) {
				return err
			}
		}
	}
}

// Reasons and messages of the node's MemoryPressure condition, as the
// Kubernetes kubelet spells them.
const (
	ReasonInsufficientMemory  = "KubeletHasInsufficientMemory"
	ReasonSufficientMemory    = "KubeletHasSufficientMemory"
	messageInsufficientMemory = "kubelet has insufficient memory available"
	messageSufficientMemory   = "kubelet has sufficient memory available"
)

// memoryPressure is what the eviction loop last saw of memory, for the
// node's MemoryPressure condition and the soft grace period. The zero value
// is no pressure, never looked at. Safe for concurrent use.
type memoryPressure struct {
	mu        sync.Mutex
	pressure  bool
	since     time.Time // when pressure last changed; zero before any change
	softSince time.Time // when usage went above EvictionSoft; zero while below
	changed   chan struct{}
	// unposted is set when pressure began and cleared once the node's
	// status said so: a pressure that ended before a status post could
	// carry it is still posted once (from trueSince), then the current
	// state. Upstream's kubelet holds the condition for its eviction
	// pressure transition period (5 minutes) after the last look that saw
	// pressure, so a status post always carries it; podsafe drops it at
	// once but never silently.
	unposted  bool
	trueSince time.Time
}

// observe records one look at memory at now and returns whether the
// pressure changed and how long usage has been above the soft threshold.
func (p *memoryPressure) observe(pressure, soft bool, now time.Time) (changed bool, softFor time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !soft:
		p.softSince = time.Time{}
	case p.softSince.IsZero():
		p.softSince = now
	}
	if soft {
		softFor = now.Sub(p.softSince)
	}
	if pressure == p.pressure {
		return false, softFor
	}
	p.pressure, p.since = pressure, now
	if pressure {
		p.unposted, p.trueSince = true, now
	}
	p.signalLocked()
	return true, softFor
}

// signalLocked asks for a node status post (changes), coalescing with one
// not yet taken.
func (p *memoryPressure) signalLocked() {
	if p.changed == nil {
		p.changed = make(chan struct{}, 1)
	}
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// current returns the pressure and when it last changed (zero: never).
func (p *memoryPressure) current() (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pressure, p.since
}

// toPost returns the pressure a node status post carries and since when:
// the current one, unless pressure began and ended again before any post
// carried it (then that pressure, stale, which reported must be told of).
func (p *memoryPressure) toPost() (pressure bool, since time.Time, stale bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unposted && !p.pressure {
		return true, p.trueSince, true
	}
	return p.pressure, p.since, false
}

// posted records that a node status carrying pressure was posted; after a
// stale one, the current state is due at once.
func (p *memoryPressure) posted(pressure, stale bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pressure {
		p.unposted = false
	}
	if stale {
		p.signalLocked()
	}
}

// changes delivers a value after the pressure changed, so the node status
// is posted at once rather than at the next NodeStatusEvery.
func (p *memoryPressure) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{}, 1)
	}
	return p.changed
}

// memoryPressureCondition is the node's MemoryPressure condition at now: True
// (KubeletHasInsufficientMemory) under pressure, else False
// (KubeletHasSufficientMemory). A status equal to old's keeps old's
// lastTransitionTime; a new one takes the time the change was seen (since),
// or now when there was none. It is pure.
func memoryPressureCondition(old *corev1.NodeCondition, pressure bool, since, now time.Time) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse,
		Reason: ReasonSufficientMemory, Message: messageSufficientMemory, LastHeartbeatTime: metav1.NewTime(now)}
	if pressure {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, ReasonInsufficientMemory, messageInsufficientMemory
	}
	switch {
	case old != nil && old.Status == c.Status:
		c.LastTransitionTime = old.LastTransitionTime
	case !since.IsZero():
		c.LastTransitionTime = metav1.NewTime(since)
	default:
		c.LastTransitionTime = metav1.NewTime(now)
	}
	return c
}

// evictable returns the worker's newest pod and whether it may be evicted:
// known, running, not terminating and not evicted already.
func (w *podWorker) evictable() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.latest
	return p, p != nil && w.evictReq == nil && !w.deleted && p.DeletionTimestamp == nil && !podTerminal(p)
}

// evict asks the worker to evict its pod with grace seconds (0: at once).
func (w *podWorker) evict(grace int64) {
	w.mu.Lock()
	w.evictReq = &grace
	w.mu.Unlock()
	w.wake()
}
