package workload

// The slot planner: what a worker of the bare-pod workloads does next with
// each of its slots (create, get, list, an extra create, delete), from what it
// knows of the pod in the slot, and runSlot, which carries it out.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podsafe/podsafe/history"
)

// slotVerb is an operation on a bare pod slot.
type slotVerb int

// The slot operations.
const (
	slotCreate slotVerb = iota // create the slot's pod
	slotGet                    // read the slot's pod
	slotList                   // list the namespace's pods
	slotExtra                  // the workload's own extra operation
	slotDelete                 // delete the slot's pod with a random grace
	slotVerbs
)

var slotVerbNames = [slotVerbs]string{"create", "get", "list", "extra", "delete"}

// String is the verb as operations record it.
func (v slotVerb) String() string { return slotVerbNames[v] }

// slotAction is one chosen slot operation.
type slotAction struct {
	verb slotVerb
	slot int // -1 for list and extra
	// variant seeds the workload's choice of pod (slotCreate) or of its
	// extra operation (slotExtra).
	variant uint64
	// lifetime is how long a created pod lives before it is deleted.
	lifetime time.Duration
	grace    *int64 // slotDelete
}

// String renders the action for tests and logs.
func (a slotAction) String() string {
	switch a.verb {
	case slotCreate:
		return fmt.Sprintf("create %d variant=%d life=%s", a.slot, a.variant, a.lifetime)
	case slotDelete:
		return fmt.Sprintf("delete %d %s", a.slot, graceValue(a.grace))
	case slotExtra:
		return fmt.Sprintf("extra variant=%d", a.variant)
	}
	return fmt.Sprintf("%s %d", a.verb, a.slot)
}

// slotKnowledge is what a process knows of one slot it owns.
type slotKnowledge int

const (
	slotAbsent slotKnowledge = iota // no pod, as far as the process knows
	slotLive                        // a pod the process created, deleted when due
	slotUnsure                      // an outcome was unknown: read it before acting
)

// slotPlanner chooses a process's operations on the bare-pod slots it owns:
// slot j belongs to worker j mod workers, so no two processes manage the same
// pod. A created pod is deleted once its lifetime is over; a slot whose state
// is unsure is read first. Not safe for concurrent use.
type slotPlanner struct {
	rng      *rand.Rand
	owned    []int
	state    map[int]slotKnowledge
	due      map[int]time.Time
	lifetime time.Duration
	maxGrace int64
	force    bool
	// weights of create, get, list and extra when nothing is due.
	weights [4]int
}

func newSlotPlanner(rng *rand.Rand, slots, worker, workers int, lifetime time.Duration, maxGrace int64, force bool, weights [4]int) *slotPlanner {
	pl := &slotPlanner{rng: rng, owned: ownedSlots(slots, worker, workers), state: map[int]slotKnowledge{},
		due: map[int]time.Time{}, lifetime: lifetime, maxGrace: maxGrace, force: force, weights: weights}
	return pl
}

// ownedSlots lists the slots of worker: j in [0, slots) with j mod workers
// == worker. It is pure.
func ownedSlots(slots, worker, workers int) []int {
	var out []int
	for j := worker; j < slots; j += max(workers, 1) {
		out = append(out, j)
	}
	return out
}

// next chooses the next operation at scaled time now. It is a pure function
// of the seed, now and the outcomes observed so far.
func (pl *slotPlanner) next(now time.Time) slotAction {
	for _, j := range pl.owned {
		if pl.state[j] == slotLive && !now.Before(pl.due[j]) {
			return slotAction{verb: slotDelete, slot: j, grace: pickGrace(pl.rng, pl.maxGrace, pl.force)}
		}
	}
	for _, j := range pl.owned {
		if pl.state[j] == slotUnsure {
			return slotAction{verb: slotGet, slot: j}
		}
	}
	a := slotAction{verb: slotVerb(pickWeighted(pl.rng, pl.weights[:])), slot: -1}
	switch a.verb {
	case slotCreate:
		var absent []int
		for _, j := range pl.owned {
			if pl.state[j] == slotAbsent {
				absent = append(absent, j)
			}
		}
		if len(absent) == 0 {
			a.verb = slotGet
			break
		}
		a.slot = absent[pl.rng.IntN(len(absent))]
		a.variant = pl.rng.Uint64()
		a.lifetime = pl.lifetime/2 + time.Duration(pl.rng.Int64N(int64(max(pl.lifetime, 1))))
	case slotExtra:
		a.variant = pl.rng.Uint64()
	}
	if a.verb == slotGet {
		if len(pl.owned) == 0 {
			a.verb = slotList
		} else {
			a.slot = pl.owned[pl.rng.IntN(len(pl.owned))]
		}
	}
	return a
}

// observe learns from the outcome of a at scaled time now; pod is what a get
// read (nil otherwise or when absent).
func (pl *slotPlanner) observe(a slotAction, now time.Time, pod *corev1.Pod, err error) {
	if a.slot < 0 {
		return
	}
	status, _ := Outcome(err)
	j := a.slot
	switch a.verb {
	case slotCreate:
		switch {
		case err == nil:
			pl.state[j], pl.due[j] = slotLive, now.Add(a.lifetime)
		case apierrors.IsAlreadyExists(err), status == history.StatusUnknown:
			pl.state[j] = slotUnsure
		default:
			pl.state[j] = slotAbsent
		}
	case slotDelete:
		switch {
		case err == nil, apierrors.IsNotFound(err):
			pl.state[j] = slotAbsent
		case status == history.StatusUnknown:
			pl.state[j] = slotUnsure
		}
		// Any other refusal keeps the pod live and due: it is tried again.
	case slotGet:
		switch {
		case err == nil && pod != nil:
			pl.learn(j, now, pod)
		case err == nil, apierrors.IsNotFound(err):
			pl.state[j] = slotAbsent
		}
	}
}

// learn updates a slot from a pod read: a pod on its way out counts as
// absent (creating again fails "exists" until it is gone, which the process
// then reads again), a finished one is due for deletion now, a live one not
// yet known gets a fresh lifetime.
func (pl *slotPlanner) learn(j int, now time.Time, pod *corev1.Pod) {
	switch {
	case pod.DeletionTimestamp != nil:
		pl.state[j] = slotAbsent
	case podTerminal(pod):
		pl.state[j], pl.due[j] = slotLive, now
	case pl.state[j] != slotLive:
		pl.state[j], pl.due[j] = slotLive, now.Add(pl.lifetime)
	}
}

// runSlot performs a slot action's common verbs (get, list, delete) on pod
// prefix<slot> in ns and teaches the planner; create and extra are the
// workload's, passed in.
func runSlot(ctx context.Context, p *proc, pl *slotPlanner, ns, prefix string, now func() time.Time, a slotAction,
	create func(slot int, variant uint64) error, extra func(variant uint64) error) {
	name := prefix + strconv.Itoa(a.slot)
	var pod *corev1.Pod
	var err error
	switch a.verb {
	case slotCreate:
		err = create(a.slot, a.variant)
	case slotGet:
		pod, err = getPod(ctx, p, ns, name)
	case slotList:
		_, err = listPods(ctx, p, ns, "")
	case slotExtra:
		if extra != nil {
			err = extra(a.variant)
		}
	case slotDelete:
		err = deletePod(ctx, p, ns, name, a.grace)
	}
	pl.observe(a, now(), pod, err)
}
