package checker

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The search without backtracking linearizes only linearizable keys: on
// generated histories, some spoiled (a read that returns another value, a
// write that reports the wrong outcome), every key it linearizes porcupine
// finds linearizable, and on clean ones it leaves few keys to porcupine.
func TestGreedyAgreesWithPorcupine(t *testing.T) {
	linearized, keys, spoiled, refused := 0, 0, 0, 0
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 11))
		h := generateRegister(genConfig{Seed: seed, Keys: 20, ClientsPerKey: 1 + int(seed%4), OpsPerKey: 30,
			UnknownRate: float64(seed%5) * 0.03, UnavailableRate: 0.02, Latency: time.Millisecond})
		if seed%2 == 1 {
			for range 1 + rng.IntN(6) {
				op := &h[rng.IntN(len(h))]
				switch {
				case op.Func == FuncGet && op.Found:
					op.Output = fmt.Sprintf("v%d", rng.IntN(20))
				case op.Func == FuncGet:
					op.Found, op.Output = true, "v1"
				case op.Func == FuncCAS && op.Error == ErrorConflict:
					op.Status, op.Error = "ok", ""
				}
			}
		}
		var stats Stats
		pops := registerOperations(h, &stats)
		budget := newSearchBudget(DefaultMaxSearchMemory, pops)
		var stopped atomic.Bool
		var s greedyScratch
		for _, idx := range partitionIndices(pops) {
			keys++
			part := make([]porcupine.Operation, len(idx))
			for k, i := range idx {
				part[k] = pops[i]
			}
			ok := porcupine.CheckOperations(registerPtrModel, part)
			if !ok {
				spoiled++
			}
			if s.search(pops, idx, budget, &stopped) {
				linearized++
				if !ok {
					t.Fatalf("seed %d: key %s linearized without backtracking, but porcupine finds it not linearizable", seed, opInput(part[0]).Key)
				}
			} else if ok {
				refused++
			}
		}
	}
	t.Logf("%d keys: %d linearized without backtracking, %d not linearizable, %d left to porcupine though linearizable", keys, linearized, spoiled, refused)
	if spoiled == 0 || linearized < keys/2 {
		t.Errorf("%d of %d keys spoiled, %d linearized: the test judges too little", spoiled, keys, linearized)
	}
}
