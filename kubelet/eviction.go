package kubelet

import (
	"cmp"
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// runEviction looks for memory pressure every EvictionEvery and evicts one
// pod per look: hard pressure (above EvictionHard) with grace 0, soft (above
// EvictionSoft) with EvictionMaxPodGracePeriod (GP-7).
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
	var grace int64
	switch {
	case k.cfg.EvictionHard > 0 && total > k.cfg.EvictionHard:
		grace = 0
	case k.cfg.EvictionSoft > 0 && total > k.cfg.EvictionSoft:
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
	ranked := RankForEviction(cands)
	if len(ranked) == 0 {
		return
	}
	v := ranked[0]
	k.log.Info("evicting pod", "pod", v.Name, "memory", total, "usage", v.Usage, "request", v.Request, "grace", grace)
	workers[v.UID].evict(grace)
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
