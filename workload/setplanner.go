package workload

// The set planner: what a worker of the StatefulSet and ReplicaSet workloads
// does next (create, scale, delete a pod, get, list), drawn by weight from
// what it knows of its sets.

import (
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// setVerb is an operation on a controller-managed set (StatefulSet or
// ReplicaSet).
type setVerb int

// The set operations.
const (
	setCreate    setVerb = iota // create the set (fails "exists" when it is there)
	setScale                    // set spec.replicas through the scale subresource
	setDeletePod                // delete one of the set's pods with a random grace
	setGet                      // read the set
	setList                     // list the namespace's pods
	setVerbs
)

var setVerbNames = [setVerbs]string{"create", "scale", "delete-pod", "get", "list"}

// String is the verb as operations record it.
func (v setVerb) String() string { return setVerbNames[v] }

// setAction is one chosen set operation.
type setAction struct {
	verb     setVerb
	set      int
	replicas int32  // setCreate, setScale
	ord      int    // setDeletePod: pet ordinal
	pick     uint64 // setDeletePod: which pod, when the set names none
	grace    *int64 // setDeletePod
	// regrace is a follow-up of setDeletePod: after regraceAfter of scaled
	// time, delete the same pod again, while it terminates, with grace
	// regraceGrace (shorter or longer than grace).
	regrace      bool
	regraceAfter time.Duration
	regraceGrace int64
	// rollout turns setScale into a Deployment's rollout to a new pod
	// template, its revision annotation set to revision.
	rollout  bool
	revision uint32
}

// String renders the action for tests and logs.
func (a setAction) String() string {
	switch a.verb {
	case setCreate, setScale:
		if a.rollout {
			return fmt.Sprintf("rollout %d revision=%d", a.set, a.revision)
		}
		return fmt.Sprintf("%s %d replicas=%d", a.verb, a.set, a.replicas)
	case setDeletePod:
		s := fmt.Sprintf("%s %d ord=%d pick=%d %s", a.verb, a.set, a.ord, a.pick, graceValue(a.grace))
		if a.regrace {
			s += fmt.Sprintf(" then after %s grace=%d", a.regraceAfter, a.regraceGrace)
		}
		return s
	}
	return fmt.Sprintf("%s %d", a.verb, a.set)
}

// setKnowledge is what a process knows of one set.
type setKnowledge int

const (
	setUnseen setKnowledge = iota // not looked at yet: read it first
	setAbsent                     // found missing: create it
	setExists                     // seen to exist
)

// setPlanner chooses a process's operations on a fixed family of sets. It
// knows only what the process saw: a set it has not looked at is read
// first, one found missing is created. Not safe for concurrent use; each
// process has its own.
type setPlanner struct {
	rng         *rand.Rand
	sets        int
	maxReplicas int
	maxGrace    int64
	force       bool
	weights     [setVerbs]int
	// regrace is the percentage of pod deletions followed by a second
	// deletion of the terminating pod (SetKnobs.Regrace); 0 draws nothing
	// more from rng, so the operations of a seed stay as they were.
	regrace int
	// rollout is the percentage of scale operations that are rollouts
	// instead (Deployments); 0 draws nothing more from rng.
	rollout  int
	state    []setKnowledge
	replicas []int // the last spec.replicas seen or written, -1 unknown
}

func newSetPlanner(rng *rand.Rand, sets, maxReplicas int, maxGrace int64, force bool, weights [setVerbs]int) *setPlanner {
	pl := &setPlanner{rng: rng, sets: sets, maxReplicas: maxReplicas, maxGrace: maxGrace, force: force,
		weights: weights, state: make([]setKnowledge, sets), replicas: make([]int, sets)}
	for i := range pl.replicas {
		pl.replicas[i] = -1
	}
	return pl
}

// next chooses the next operation. It is a pure function of the seed and
// the outcomes observed so far.
func (pl *setPlanner) next() setAction {
	a := setAction{set: pl.rng.IntN(pl.sets)}
	switch pl.state[a.set] {
	case setUnseen:
		a.verb = setGet
	case setAbsent:
		a.verb = setCreate
	default:
		a.verb = setVerb(pickWeighted(pl.rng, pl.weights[:]))
	}
	switch a.verb {
	case setCreate, setScale:
		a.replicas = int32(pl.rng.IntN(pl.maxReplicas + 1))
		if a.verb == setScale && pl.rollout > 0 && pl.rng.IntN(100) < pl.rollout {
			a.rollout, a.revision = true, pl.rng.Uint32()
		}
	case setDeletePod:
		// A pet beyond the replicas the process last saw is most likely
		// gone; aim at the ones that should exist.
		n := pl.replicas[a.set]
		if n < 0 {
			n = pl.maxReplicas
		}
		a.ord = pl.rng.IntN(max(n, 1))
		a.pick = pl.rng.Uint64()
		a.grace = pickGrace(pl.rng, pl.maxGrace, pl.force)
		if pl.regrace > 0 && pl.rng.IntN(100) < pl.regrace {
			a.regrace = true
			a.regraceAfter, a.regraceGrace = pickRegrace(pl.rng, a.grace, pl.maxGrace)
		}
	}
	return a
}

// pickRegrace draws the second deletion of a pod deleted with grace first
// (nil: the pod's own): with probability first/maxSec a much shorter grace,
// uniform in 1..max(first/3, 1), otherwise a longer one, uniform in
// first+1..maxSec (uniform in 1..maxSec when first is nil), so that long
// graces are mostly shortened and short ones mostly lengthened; and a delay
// uniform in [0, first/4) of scaled time (at most 1 s when first is nil or
// tiny), so that the pod is still terminating and a kubelet keeping the
// first deadline overruns the second by far. It is pure given rng.
func pickRegrace(rng *rand.Rand, first *int64, maxSec int64) (time.Duration, int64) {
	maxSec = max(maxSec, 2)
	var g int64
	switch {
	case first == nil:
		g = 1 + rng.Int64N(maxSec)
	case *first > 1 && (*first >= maxSec || rng.Int64N(maxSec) < *first):
		g = 1 + rng.Int64N(max(min(*first, maxSec)/3, 1))
	default:
		g = *first + 1 + rng.Int64N(maxSec-*first)
	}
	span := 4 * time.Second
	if first != nil && *first > 4 {
		span = time.Duration(*first) * time.Second
	}
	return time.Duration(rng.Int64N(int64(span / 4))), g
}

// observe learns from the outcome of a whether the set exists and, when a
// wrote it or a get read it (replicas, -1 when not known), its replicas.
func (pl *setPlanner) observe(a setAction, replicas int, err error) {
	switch {
	case a.rollout && err == nil:
		pl.state[a.set] = setExists // its replicas unchanged
	case a.verb == setCreate && err == nil, a.verb == setScale && err == nil:
		pl.state[a.set], pl.replicas[a.set] = setExists, int(a.replicas)
	case a.verb == setCreate && apierrors.IsAlreadyExists(err):
		pl.state[a.set] = setExists
	case a.verb == setGet && err == nil:
		pl.state[a.set] = setExists
		if replicas >= 0 {
			pl.replicas[a.set] = replicas
		}
	case (a.verb == setScale || a.verb == setGet) && apierrors.IsNotFound(err):
		pl.state[a.set], pl.replicas[a.set] = setAbsent, -1
	}
}
