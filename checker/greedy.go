package checker

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/anishathalye/porcupine"
)

// A search that never backtracks, tried on each key before porcupine's.
// Porcupine walks a key's calls and returns in time order and linearizes
// the first pending call that is legal in the current state; at the
// return of a call it could not linearize, it backtracks, and it caches
// every state it reaches so as not to search one twice. On the histories
// of a healthy store it almost never backtracks, and the cache (a bitset
// per state, cloned at every step) is most of its cost. greedySearch is
// the same walk without backtracking and without the cache: where it
// linearizes a key, porcupine would have found that linearization too (it
// tries the same steps in the same order first), so the key is
// linearizable; where it meets a return it cannot pass, the key goes to
// porcupine, which decides it as before. Its steps draw on the same memory
// budget, so a budget too small for any step stops a key here as it stops
// porcupine.

// greedyKeys tries greedySearch on every key of pops, the keys side by
// side, and returns the operations of the keys it did not linearize (each
// key's in pops' order, for porcupine) and how many keys it linearized.
func greedyKeys(pops []porcupine.Operation, budget *searchBudget, stopped *atomic.Bool) (rest []porcupine.Operation, linearized int) {
	parts := partitionIndices(pops)
	done := make([]bool, len(parts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(parts)) {
		wg.Go(func() {
			var s greedyScratch
			for {
				i := int(next.Add(1)) - 1
				if i >= len(parts) {
					return
				}
				done[i] = s.search(pops, parts[i], budget, stopped)
			}
		})
	}
	wg.Wait()
	for i, part := range parts {
		if done[i] {
			linearized++
			continue
		}
		// Porcupine searches it afresh: its allowance is whole again.
		if kb := budget.keys[opInput(pops[part[0]]).Key]; !kb.over.Load() {
			kb.steps = 0
		}
		for _, k := range part {
			rest = append(rest, pops[k])
		}
	}
	return rest, linearized
}

// greedyEvent is the call or the return of one operation of a key.
type greedyEvent struct {
	t   int64
	ret bool
	op  int32
}

// greedyScratch holds what greedySearch allocates, reused from key to key.
type greedyScratch struct {
	events     []greedyEvent
	next, prev []int32
	part       []*porcupine.Operation
	retAt      []int32 // per operation, the index of its return event
	unknown    []int32 // calls of unknown outcome that may come next
}

// search reports whether it linearized the operations of one key (see the
// comment above greedyKeys).
func (s *greedyScratch) search(pops []porcupine.Operation, idx []int32, budget *searchBudget, stopped *atomic.Bool) bool {
	s.part = s.part[:0]
	for _, k := range idx {
		s.part = append(s.part, &pops[k])
	}
	part := s.part
	kb := budget.keys[opInput(*part[0]).Key]
	n := len(part)
	s.events = s.events[:0]
	for i, p := range part {
		s.events = append(s.events, greedyEvent{t: p.Call, op: int32(i)}, greedyEvent{t: p.Return, ret: true, op: int32(i)})
	}
	// In time order, a call before a return at the same time (porcupine's
	// order: such operations are concurrent).
	slices.SortFunc(s.events, func(a, b greedyEvent) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		switch {
		case a.ret == b.ret:
			return 0
		case !a.ret:
			return -1
		}
		return 1
	})
	// A doubly linked list of the events left, from a head at index m.
	m := int32(len(s.events))
	s.next, s.prev, s.retAt = slices.Grow(s.next[:0], int(m)+1)[:m+1], slices.Grow(s.prev[:0], int(m)+1)[:m+1], slices.Grow(s.retAt[:0], n)[:n]
	for i := range m {
		s.next[i], s.prev[i] = i+1, i-1
		if s.events[i].ret {
			s.retAt[s.events[i].op] = i
		}
	}
	s.next[m-1] = -1
	s.next[m], s.prev[0] = 0, m
	unlink := func(i int32) {
		s.next[s.prev[i]] = s.next[i]
		if s.next[i] >= 0 {
			s.prev[s.next[i]] = s.prev[i]
		}
	}

	var state RegisterState
	known := 0 // operations of a known outcome not yet linearized
	for _, p := range part {
		if opOutput(*p).Outcome != OutcomeUnknown {
			known++
		}
	}
	linearize := func(e int32, after RegisterState) bool {
		kb.steps++
		if kb.steps > kb.allowance && budget.pool.Add(-kb.cost) < 0 {
			kb.over.Store(true)
			return false
		}
		op := s.events[e].op
		if opOutput(*part[op]).Outcome != OutcomeUnknown {
			known--
		}
		state = after
		unlink(e)
		unlink(s.retAt[op])
		return true
	}
	for {
		if stopped.Load() || kb.over.Load() {
			return false
		}
		if known == 0 {
			// What is left may all take effect or not, in any order: each
			// step is legal.
			return true
		}
		// The calls before the first return left: the operations that may
		// come next. A legal one of a known outcome goes first: one that
		// leaves the state as it is (a read) at once, else the one that
		// must be linearized soonest (the earliest return).
		s.unknown = s.unknown[:0]
		var next RegisterState
		found, due := int32(-1), int64(0)
		for e := s.next[m]; e >= 0 && !s.events[e].ret; e = s.next[e] {
			p := *part[s.events[e].op]
			if opOutput(p).Outcome == OutcomeUnknown {
				s.unknown = append(s.unknown, e)
				continue
			}
			ok, after := Step(state, opInput(p), opOutput(p))
			if !ok {
				continue
			}
			if after == state {
				found, next = e, after
				break
			}
			if found < 0 || p.Return < due {
				found, next, due = e, after, p.Return
			}
		}
		if found < 0 {
			// Else a write of unknown outcome that makes one of them legal.
			found, next = s.enabling(part, state)
		}
		if found < 0 || !linearize(found, next) {
			return false
		}
	}
}

// enabling returns an operation of unknown outcome among s.unknown whose
// write, taking effect in state, makes some call of a known outcome before
// the first return legal, and the state after it; -1 when there is none.
func (s *greedyScratch) enabling(part []*porcupine.Operation, state RegisterState) (int32, RegisterState) {
	m := int32(len(s.events))
	for _, u := range s.unknown {
		_, after := Step(state, opInput(*part[s.events[u].op]), opOutput(*part[s.events[u].op]))
		if after == state {
			continue
		}
		for e := s.next[m]; e >= 0 && !s.events[e].ret; e = s.next[e] {
			p := *part[s.events[e].op]
			if opOutput(p).Outcome == OutcomeUnknown {
				continue
			}
			if ok, _ := Step(after, opInput(p), opOutput(p)); ok {
				return u, after
			}
		}
	}
	return -1, state
}
