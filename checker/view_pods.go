package checker

import (
	"bytes"
	"context"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/podsafe/podsafe/history"
)

// The view's pods: every store event of a pod decoded once, by the pod
// scanner, and grouped by instance (UID) and by name.

// podVersion is one store event of a pod (resource "pods").
type podVersion struct {
	store int // index in h.Store
	rv    uint64
	rvOK  bool // the resourceVersion parses
	// pod is the object as decoded; nil when the event has none or it does
	// not decode.
	pod *poPod
}

// podIndex is what the store events say of pods.
type podIndex struct {
	store []history.StoreEvent
	// versions are the store events of pods, in store order.
	versions []podVersion
	// instances are the pod instances (UIDs) with their changes in commit
	// order, once each, in the order of their first change; an event counts
	// when it decodes, names a UID and has a resourceVersion, and undecoded
	// counts the events with an object that do not.
	instances []*poPodHistory
	byUID     map[string]*poPodHistory
	undecoded int
	// spread and taintMarked say whether some pod object mentions the key
	// "topologySpreadConstraints" (spreadApplies), or the taint eviction
	// controller's reason (nodeHealthApplies), textually.
	spread, taintMarked bool

	specsOnce sync.Once
	specs     map[string]*poPod
	bindOnce  sync.Once
	bindings  *podBindings
}

// pods returns the view's pods, decoding them on first use.
func (v *view) pods(ctx context.Context) (*podIndex, bool) {
	return v.podPart.get(ctx, v, "pods", func(ctx context.Context) (*podIndex, bool) { return buildPodIndex(ctx, v.h.Store) })
}

// podChunk is how many store events a decoding worker takes at a time.
const podChunk = 256

// buildPodIndex decodes the pod events of store on every processor and
// groups them. It reports false when ctx ended first.
func buildPodIndex(ctx context.Context, store []history.StoreEvent) (*podIndex, bool) {
	// Every event of a pod-like resource is read for the text tests (the
	// spread checker counts "pods.*" too); those of "pods" are decoded.
	var idx []int
	for i := range store {
		if schedKindOf(store[i].Resource) == schedPods {
			idx = append(idx, i)
		}
	}
	pi := &podIndex{store: store, versions: make([]podVersion, 0, len(idx))}
	decoded := make([]poPod, len(idx))
	versions := make([]podVersion, len(idx))
	var spread, taint, cancelled atomic.Bool
	var next atomic.Int64
	workers := min(runtime.GOMAXPROCS(0), len(idx)/podChunk+1)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			sc := newPoScanner()
			sawSpread, sawTaint := false, false
			for {
				if ctx.Err() != nil {
					cancelled.Store(true)
					return
				}
				lo := int(next.Add(podChunk)) - podChunk
				if lo >= len(idx) {
					break
				}
				for j := lo; j < min(lo+podChunk, len(idx)); j++ {
					ev := &store[idx[j]]
					if !sawSpread && containsQuoted(ev.Object, "topologySpreadConstraints") {
						sawSpread = true
					}
					if ev.Resource != "pods" {
						versions[j].store = -1
						continue
					}
					if !sawTaint && bytes.Contains(ev.Object, []byte(podReasonTaintManager)) {
						sawTaint = true
					}
					vr := &versions[j]
					vr.store = idx[j]
					rv, err := strconv.ParseUint(ev.RV, 10, 64)
					vr.rv, vr.rvOK = rv, err == nil
					if len(ev.Object) > 0 && sc.decode(ev.Object, &decoded[j]) == nil {
						vr.pod = &decoded[j]
					}
				}
			}
			if sawSpread {
				spread.Store(true)
			}
			if sawTaint {
				taint.Store(true)
			}
		})
	}
	wg.Wait()
	if cancelled.Load() {
		return nil, false
	}
	pi.spread, pi.taintMarked = spread.Load(), taint.Load()
	for _, vr := range versions {
		if vr.store >= 0 {
			pi.versions = append(pi.versions, vr)
		}
	}
	pi.instances, pi.byUID, pi.undecoded = groupInstances(store, pi.versions)
	return pi, true
}

// containsQuoted reports whether b holds the JSON string "word" (quotes
// included), as bytes.Contains would, but searching for the word's tail
// from its first capital letter, rarer than a quote, which is in every few
// bytes of JSON.
func containsQuoted(b []byte, word string) bool {
	split := strings.IndexFunc(word, unicode.IsUpper)
	if split < 0 {
		split = 0
	}
	tail, head := word[split:]+`"`, `"`+word[:split]
	for {
		i := bytes.Index(b, []byte(tail))
		if i < 0 {
			return false
		}
		if i >= len(head) && string(b[i-len(head):i]) == head {
			return true
		}
		b = b[i+1:]
	}
}

// groupInstances groups the pod versions that decode, name a UID and have a
// resourceVersion by UID, each group in resourceVersion order without
// repeats (a recorder that resumed its watch may record a change twice),
// the groups in the order of their first change. It counts the versions
// with an object left out.
func groupInstances(store []history.StoreEvent, versions []podVersion) (pods []*poPodHistory, byUID map[string]*poPodHistory, undecoded int) {
	// Each version's group first, then the groups' events in one array.
	groups := map[string]int32{}
	group := make([]int32, len(versions))
	var sizes []int
	total := 0
	for k, vr := range versions {
		group[k] = -1
		if len(store[vr.store].Object) == 0 {
			continue
		}
		if vr.pod == nil || !vr.rvOK || vr.pod.Metadata.UID == "" {
			undecoded++
			continue
		}
		uid := vr.pod.Metadata.UID
		g, ok := groups[uid]
		if !ok {
			g = int32(len(pods))
			groups[uid] = g
			pods = append(pods, &poPodHistory{uid: uid})
			sizes = append(sizes, 0)
		}
		group[k] = g
		sizes[g]++
		total++
	}
	all := make([]poEvent, total)
	byUID = make(map[string]*poPodHistory, len(pods))
	at := 0
	for g, ph := range pods {
		ph.events = all[at : at : at+sizes[g]]
		at += sizes[g]
		byUID[ph.uid] = ph
	}
	for k, vr := range versions {
		if g := group[k]; g >= 0 {
			ph, ev := pods[g], &store[vr.store]
			ph.events = append(ph.events, poEvent{store: vr.store, rv: vr.rv, typ: ev.Type, t: ev.T, pod: vr.pod})
		}
	}
	for _, ph := range pods {
		evs := ph.events
		if !sort.SliceIsSorted(evs, func(a, b int) bool { return evs[a].rv < evs[b].rv }) {
			sort.SliceStable(evs, func(a, b int) bool { return evs[a].rv < evs[b].rv })
		}
		out := evs[:1]
		for _, e := range evs[1:] {
			if e.rv != out[len(out)-1].rv {
				out = append(out, e)
			}
		}
		ph.events = out
	}
	sort.SliceStable(pods, func(a, b int) bool { return pods[a].events[0].rv < pods[b].events[0].rv })
	return pods, byUID, undecoded
}

// spec returns the pod with uid as first recorded, for checkers that need
// only its spec: its first creation (ADDED) in commit order, else its first
// change of another type; only versions that decode, name a UID and have a
// resourceVersion count. Nil when the store records none.
func (pi *podIndex) spec(uid string) *poPod {
	pi.specsOnce.Do(func() {
		type pick struct {
			pod *poPod
			rv  uint64
		}
		added, other := map[string]pick{}, map[string]pick{}
		for _, vr := range pi.versions {
			if vr.pod == nil || !vr.rvOK || vr.pod.Metadata.UID == "" {
				continue
			}
			m := other
			if pi.store[vr.store].Type == history.StoreAdded {
				m = added
			}
			// The smallest resourceVersion, the first recorded among equals.
			if cur, ok := m[vr.pod.Metadata.UID]; !ok || vr.rv < cur.rv {
				m[vr.pod.Metadata.UID] = pick{vr.pod, vr.rv}
			}
		}
		pi.specs = make(map[string]*poPod, len(other)+len(added))
		for uid, p := range other {
			pi.specs[uid] = p.pod
		}
		for uid, p := range added {
			pi.specs[uid] = p.pod
		}
	})
	return pi.specs[uid]
}
