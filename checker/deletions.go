package checker

import (
	"encoding/json"
	"math"
	"sort"

	"github.com/podsafe/podsafe/history"
)

// deletionIndex answers, in O(log n), which recorded deletion requests may
// have reached a pod before a given time, and whether the history shows its
// object gone. Every request that may have happened counts (outcome ok or
// unknown): for the grace-period bound, more deletions can only lower the
// grace and weaken the bound, never make it wrongly stricter.
type deletionIndex struct {
	api []history.APICall
	// certain are the deletions of a pod by name whose answer carried the
	// deleted pod's UID, keyed by namespace/name and UID.
	certain map[podUID]*callSeries
	// byName are the deletions of a pod by name whose answer named no UID:
	// they may have deleted any pod of that name.
	byName map[string]*callSeries
	// byNamespace are the deletecollections of pods, by namespace ("" for
	// every namespace): they may have deleted any pod there.
	byNamespace map[string]*callSeries
	// gone are the calls that saw a pod name free: a 404 on it, or a
	// successful create of that name.
	gone map[string]*goneSeries
}

type podUID struct{ pod, uid string }

func newDeletionIndex(api []history.APICall) *deletionIndex {
	d := &deletionIndex{api: api, certain: map[podUID]*callSeries{}, byName: map[string]*callSeries{},
		byNamespace: map[string]*callSeries{}, gone: map[string]*goneSeries{}}
	order := make([]int, len(api))
	for i := range order {
		order[i] = i
	}
	if !sort.SliceIsSorted(api, func(a, b int) bool { return api[a].Invoke < api[b].Invoke }) {
		sort.SliceStable(order, func(a, b int) bool { return api[order[a]].Invoke < api[order[b]].Invoke })
	}
	series := func(m map[string]*callSeries, k string) *callSeries {
		if m[k] == nil {
			m[k] = &callSeries{}
		}
		return m[k]
	}
	for _, i := range order {
		c := api[i]
		if c.Group != "" || c.Resource != "pods" {
			continue
		}
		deletion, gone := isPodDeletion(&c) && mayHaveHappened(&c), c.Name != "" && (c.Code == 404 || (isPodCreate(&c) && c.Outcome == history.StatusOK))
		var pod string
		if deletion || gone {
			pod = podRef(c.Namespace, c.Name)
		}
		switch {
		case deletion && c.UID != "":
			k := podUID{pod, c.UID}
			if d.certain[k] == nil {
				d.certain[k] = &callSeries{}
			}
			d.certain[k].add(i, c)
		case deletion:
			series(d.byName, pod).add(i, c)
		case isPodCollectionDeletion(&c) && mayHaveHappened(&c):
			series(d.byNamespace, c.Namespace).add(i, c)
		}
		if gone {
			if d.gone[pod] == nil {
				d.gone[pod] = &goneSeries{}
			}
			d.gone[pod].add(i, c)
		}
	}
	for _, g := range d.gone {
		g.finish()
	}
	return d
}

// callSeries is a list of deletion requests in invoke order with prefix
// summaries of their grace periods.
type callSeries struct {
	idx      []int   // API indices
	invoke   []int64 // their invoke times
	minGrace []int64 // prefix minimum of the explicit graces after GP-6 (negative is 1); math.MaxInt64 for none
	minAt    []int   // the API index of that minimum, or -1
	nilAt    []int   // prefix: the first request that gave no grace, or -1
}

func (s *callSeries) add(i int, c history.APICall) {
	g, at, nilAt := int64(math.MaxInt64), -1, -1
	if n := len(s.idx); n > 0 {
		g, at, nilAt = s.minGrace[n-1], s.minAt[n-1], s.nilAt[n-1]
	}
	switch {
	case c.GracePeriodSeconds == nil:
		if nilAt < 0 {
			nilAt = i
		}
	default:
		v := *c.GracePeriodSeconds
		if v < 0 {
			v = 1 // GP-6: a negative grace becomes 1
		}
		if v < g {
			g, at = v, i
		}
	}
	s.idx = append(s.idx, i)
	s.invoke = append(s.invoke, c.Invoke)
	s.minGrace = append(s.minGrace, g)
	s.minAt = append(s.minAt, at)
	s.nilAt = append(s.nilAt, nilAt)
}

// before returns how many requests were invoked before cutoff.
func (s *callSeries) before(cutoff int64) int {
	if s == nil {
		return 0
	}
	return sort.Search(len(s.invoke), func(i int) bool { return s.invoke[i] >= cutoff })
}

// goneSeries lists the calls that saw a pod name free, in invoke order, with
// the suffix minimum of their return times.
type goneSeries struct {
	idx    []int
	invoke []int64
	ret    []int64
	sufMin []int // index into idx of the earliest return from here on
}

func (g *goneSeries) add(i int, c history.APICall) {
	g.idx = append(g.idx, i)
	g.invoke = append(g.invoke, c.Invoke)
	g.ret = append(g.ret, c.Return)
}

func (g *goneSeries) finish() {
	g.sufMin = make([]int, len(g.idx))
	for k := len(g.idx) - 1; k >= 0; k-- {
		g.sufMin[k] = k
		if k+1 < len(g.idx) && g.ret[g.sufMin[k+1]] < g.ret[k] {
			g.sufMin[k] = g.sufMin[k+1]
		}
	}
}

// seenGone returns a call invoked after `after` and returned by `by` that
// found the name free, or -1.
func (g *goneSeries) seenGone(after, by int64) int {
	if g == nil {
		return -1
	}
	k := sort.Search(len(g.invoke), func(i int) bool { return g.invoke[i] > after })
	if k == len(g.invoke) || g.ret[g.sufMin[k]] > by {
		return -1
	}
	return g.idx[g.sufMin[k]]
}

// requestedGrace is what the API history says of the grace period of a pod
// instance's deletion by some time.
type requestedGrace struct {
	// grace is the smallest grace period requested (GP-6: a negative one
	// counts as 1), or 0 when the object was seen gone; known says whether
	// there was any.
	grace int64
	known bool
	// sources are the API calls behind grace.
	sources []int
	// unspecified: a request may have given no grace, so the pod's own
	// (unknown to the history) may be smaller.
	unspecified bool
	// triggeredBy is a deletion certainly of this UID invoked before the
	// kill began, or -1.
	triggeredBy int
}

// requested summarizes the deletions that may have reached pod (UID uid)
// before cutoff; killStart is when its kill began and existed a time the
// object surely existed (when its first container started).
func (d *deletionIndex) requested(pod, namespace, uid string, existed, killStart, cutoff int64) requestedGrace {
	rg := requestedGrace{grace: math.MaxInt64, triggeredBy: -1}
	take := func(s *callSeries, certain bool) {
		n := s.before(cutoff)
		if n == 0 {
			return
		}
		if certain && s.invoke[0] < killStart {
			rg.triggeredBy = s.idx[0]
		}
		if s.nilAt[n-1] >= 0 {
			rg.unspecified = true
		}
		if g := s.minGrace[n-1]; g != math.MaxInt64 {
			rg.known = true
			switch {
			case g < rg.grace:
				rg.grace, rg.sources = g, []int{s.minAt[n-1]}
			case g == rg.grace:
				rg.sources = append(rg.sources, s.minAt[n-1])
			}
		}
	}
	if uid != "" {
		take(d.certain[podUID{pod, uid}], true)
	}
	take(d.byName[pod], false)
	take(d.byNamespace[namespace], false)
	if namespace != "" {
		take(d.byNamespace[""], false)
	}
	if i := d.gone[pod].seenGone(existed, cutoff); i >= 0 {
		rg.grace, rg.known, rg.sources = 0, true, []int{i}
	}
	return rg
}

// graceFacts is what the store events say about the grace periods of pod
// instances and about what else may have killed them, by UID.
type graceFacts struct {
	pods map[string]*podGraceFacts
	// memory: some pod's container script declares memory use, so a kubelet
	// may have evicted pods for memory pressure; pressure: some node
	// reported MemoryPressure. Either lets a kubelet's eviction explain a
	// shorter grace.
	memory, pressure bool
	// invokedAt maps a pod resourceVersion an API call answered with to
	// the earliest invoke time of such a call: when the write that made
	// that version was asked for.
	invokedAt map[string]int64
}

// podGraceFacts is what the store shows of one pod instance.
type podGraceFacts struct {
	// probes: a container declares a startup or liveness probe, whose kill
	// has a grace of its own (GP-1).
	probes bool
	// evicted: some version carries status.reason Evicted.
	evicted bool
	// gone is the recorder time of the object's DELETED event, or
	// math.MaxInt64.
	gone int64
	// shortened lists the changes that lowered deletionGracePeriodSeconds
	// of an object already terminating, in store order.
	shortened []graceChange
}

// graceChange is one committed change of a pod's deletionGracePeriodSeconds.
type graceChange struct {
	t         int64 // recorder time of the store event
	from, to  int64
	rv, event string
}

// scriptAnnotationPrefix starts the annotations that script the simulated
// runtime's containers (kubelet.ScriptAnnotationPrefix; the checker does not
// import the system); a script word "mem=…" makes the container use memory.
const scriptAnnotationPrefix = "podsafe.io/script."

// newGraceFacts reads what the store records of pods and nodes.
func newGraceFacts(pods *podIndex, nodes *nodeIndex) *graceFacts {
	f := &graceFacts{pods: map[string]*podGraceFacts{}, pressure: nodes.memoryPressure}
	last := map[string]int64{} // UID → deletionGracePeriodSeconds seen last, -1 for none
	for _, vr := range pods.versions {
		p := vr.pod
		if p == nil || p.Metadata.UID == "" {
			continue
		}
		ev := &pods.store[vr.store]
		u := p.Metadata.UID
		pf := f.pods[u]
		if pf == nil {
			// A pod's containers and scripts are fixed at its creation.
			pf = &podGraceFacts{gone: math.MaxInt64, probes: p.hasKillingProbe()}
			f.pods[u] = pf
			last[u] = -1
			if p.Metadata.Scripts.usesMemory() {
				f.memory = true
			}
		}
		if p.Status.Reason == "Evicted" {
			pf.evicted = true
		}
		if ev.Type == history.StoreDeleted {
			pf.gone = min(pf.gone, ev.T)
			continue
		}
		if d := p.Metadata.DeletionGracePeriodSeconds; d != nil {
			if prev := last[u]; prev > 0 && *d < prev && *d > 0 {
				pf.shortened = append(pf.shortened, graceChange{t: ev.T, from: prev, to: *d, rv: ev.RV, event: podRef(ev.Namespace, ev.Name)})
			}
			last[u] = *d
		}
	}
	return f
}

// probedContainer is the part of a container spec that says whether it
// has a probe whose failure kills it.
type probedContainer struct {
	StartupProbe  *json.RawMessage `json:"startupProbe"`
	LivenessProbe *json.RawMessage `json:"livenessProbe"`
}

// onlyDeletionKills reports whether the store rules out every kill of pod
// uid, up to recorder time by, other than one for its deletion with a grace
// a deletion asked for: the store recorded the pod, none of its containers
// has a probe that kills, no kubelet may have evicted it (no pod uses
// memory, no node reported MemoryPressure, the pod was never marked
// Evicted), its object still existed (no orphan kill, LC-13), and the API
// server never shortened its deletionGracePeriodSeconds to 1 s (see
// shortenedToOne).
func (f *graceFacts) onlyDeletionKills(uid string, by int64) bool {
	pf := f.pods[uid]
	return pf != nil && !pf.probes && !pf.evicted && pf.gone > by && !f.memory && !f.pressure && !f.shortenedToOne(uid, by)
}

// shortenedToOne reports whether the store shows pod uid's
// deletionGracePeriodSeconds shortened to 1 s by a write that was asked for
// by recorder time by: recorded by then, or answered to a call invoked by
// then (the store's own record of a change may come after the kubelet that
// watched it acted on it).
func (f *graceFacts) shortenedToOne(uid string, by int64) bool {
	pf := f.pods[uid]
	if pf == nil {
		return false
	}
	if pf.shortenedToOne(by) {
		return true
	}
	for _, ch := range pf.shortened {
		if t, ok := f.invokedAt[ch.rv]; ok && ch.to == 1 && t <= by {
			return true
		}
	}
	return false
}

// shortenedToOne reports whether the store shows the pod's
// deletionGracePeriodSeconds shortened to 1 s by recorder time by. A DELETE
// of a pod already terminating that asks for a shorter grace g moves the
// deadline to the deletion's start + g, and when that has passed, to now
// with grace 1 (kube-apiserver's rule, which podsafe's API server follows,
// GP-6, PS-3): a grace below every one the deletions asked for, which the
// kubelet rightly honours (GP-5) and the API history alone cannot tell.
func (pf *podGraceFacts) shortenedToOne(by int64) bool {
	for _, ch := range pf.shortened {
		if ch.t <= by && ch.to == 1 {
			return true
		}
	}
	return false
}
