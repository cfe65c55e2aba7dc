package checker

import (
	"fmt"
	"maps"
)

// schedFinal is the final state as the scheduler's filters see it, built
// once for every pending pod roomFor judges.
type schedFinal struct {
	pods      []*schedPod // by index in FinalState.Pods; nil when undecoded
	nodes     []*schedNode
	occupied  map[string]schedRes    // node -> requests of the pods bound there
	nominated map[string][]*schedPod // node -> pending pods nominated there
	broken    bool                   // some object did not decode
}

func newSchedFinal(st FinalState) *schedFinal {
	f := &schedFinal{pods: make([]*schedPod, len(st.Pods)), nodes: make([]*schedNode, len(st.Nodes)),
		occupied: map[string]schedRes{}, nominated: map[string][]*schedPod{}}
	for i, raw := range st.Pods {
		q, err := decodeSchedPod(raw)
		if err != nil {
			f.broken = true
			continue
		}
		f.pods[i] = q
		switch {
		case q.occupies():
			u := f.occupied[q.node]
			u.add(q.requests)
			f.occupied[q.node] = u
		case q.pending() && q.nominated != "":
			f.nominated[q.nominated] = append(f.nominated[q.nominated], q)
		}
	}
	for i, raw := range st.Nodes {
		n, err := decodeSchedNode(raw)
		if err != nil {
			f.broken = true
			continue
		}
		f.nodes[i] = n
	}
	return f
}

// roomFor names a healthy node on which pending pod i fits as the
// scheduler's filters that depend on no other pod's labels decide it
// (cordon, taints, node selector and required node affinity, requested
// resources against what the pods bound there request and what pending
// pods of at least its priority nominated there reserve), or "" when none
// does, or the pod uses what these rules do not follow (topology spread,
// inter-pod affinity, host ports, volume or resource claims), or some
// object did not decode.
func (f *schedFinal) roomFor(i int, healthy map[string]bool) string {
	p := f.pods[i]
	if f.broken || p == nil || !p.pending() || p.filtered || p.hasPodAffinityTerms || len(p.spread) > 0 {
		return ""
	}
	for _, n := range f.nodes {
		if !healthy[n.name] || !p.passesNodeFilters(n) {
			continue
		}
		used := f.occupied[n.name]
		used.scalar = maps.Clone(used.scalar) // add changes it in place
		for _, q := range f.nominated[n.name] {
			if q != p && q.priority >= p.priority {
				used.add(q.requests)
			}
		}
		if p.requests.fits(used, n.alloc) {
			return fmt.Sprintf("node %s, which is Ready, has room for it (it requests %s; the pods there take %s of %s)", n.name, p.requests, used, n.alloc)
		}
	}
	return ""
}
