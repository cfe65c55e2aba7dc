package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A small Jepsen: clients read and write registers (the spec.v of a few
// objects) through random members while links are cut, and porcupine checks
// that the history is linearizable.

type regInput struct {
	key   string
	write bool
	value string
}

type regOutput struct {
	value   string
	unknown bool // a write whose outcome is unknown (ErrTimeout)
}

var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(regInput), output.(regOutput)
		if in.write {
			return true, in.value
		}
		return out.value == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.write {
			return fmt.Sprintf("write(%s, %q) unknown=%v", in.key, in.value, out.unknown)
		}
		return fmt.Sprintf("read(%s) = %q", in.key, out.value)
	},
}

// recorder builds a porcupine history from one monotonic time base.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// register performs one operation on a register and records it. Failed
// reads and writes that are certainly not applied (ErrUnavailable) are left
// out; writes with unknown outcome never return.
func (r *recorder) register(t *testing.T, ctx context.Context, client int, s *Store, in regInput) {
	key := Key{Resource: "registers", Name: in.key}
	call := r.now()
	if in.write {
		data, _ := json.Marshal(map[string]any{"spec": map[string]string{"v": in.value}})
		_, err := s.Update(ctx, key, data, Preconditions{})
		switch {
		case err == nil:
			r.add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{}, Return: r.now()})
		case errors.Is(err, ErrTimeout):
			r.add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{unknown: true}, Return: math.MaxInt64})
		case errors.Is(err, ErrUnavailable):
		default:
			t.Errorf("write %v: %v", in, err)
		}
		return
	}
	obj, err := s.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTimeout) {
			t.Errorf("read %v: %v", in, err)
		}
		return
	}
	var v struct {
		Spec struct {
			V string `json:"v"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(obj.Data, &v); err != nil {
		t.Errorf("decoding %s: %v", obj.Data, err)
	}
	r.add(porcupine.Operation{ClientId: client, Input: in, Call: call, Output: regOutput{value: v.Spec.V}, Return: r.now()})
}

func createRegisters(t *testing.T, ctx context.Context, s *Store, keys []string) {
	t.Helper()
	for _, k := range keys {
		if _, err := s.Create(ctx, Key{Resource: "registers", Name: k}, []byte(`{"spec":{"v":""}}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLinearizableUnderPartitions(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.LeaderWait = 500 * time.Millisecond }))
	ctx := testCtx(t)
	keys := []string{"x", "y", "z"}
	createRegisters(t, ctx, c.Leader(), keys)
	rec := &recorder{start: time.Now()}
	stores := c.Stores

	const duration = 3 * time.Second
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for client := range 2 * len(keys) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(1, uint64(client)))
			key := keys[client%len(keys)] // two clients per key keeps the check fast
			for n := 0; time.Now().Before(stop); n++ {
				in := regInput{key: key, write: rng.IntN(2) == 0, value: fmt.Sprintf("c%d-%d", client, n)}
				opCtx, cancel := context.WithTimeout(ctx, time.Second)
				rec.register(t, opCtx, client, stores[rng.IntN(len(stores))], in)
				cancel()
			}
		}()
	}

	// Nemesis: cut off the leader or a follower, then heal, a few times.
	rng := rand.New(rand.NewPCG(7, 7))
	for time.Now().Add(600 * time.Millisecond).Before(stop) {
		victim := rng.IntN(len(stores))
		if rng.IntN(2) == 0 {
			victim = c.Index(c.Leader().ID())
		}
		c.IsolateMember(victim)
		time.Sleep(400 * time.Millisecond)
		c.Net.Heal()
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()

	res, info := porcupine.CheckOperationsVerbose(registerModel, rec.ops, 20*time.Second)
	t.Logf("%d operations checked: %s", len(rec.ops), res)
	if res != porcupine.Ok {
		reportNonLinearizable(t, info, res)
	}
}

// reportNonLinearizable writes porcupine's visualization for a failed check.
func reportNonLinearizable(t *testing.T, info porcupine.LinearizationInfo, res porcupine.CheckResult) {
	t.Helper()
	path := t.TempDir() + "/linearizability.html"
	if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
		t.Logf("writing visualization: %v", err)
	}
	t.Errorf("history is %s, not linearizable (visualization: %s)", res, path)
}

func TestStaleReadsAreNotLinearizable(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.StaleReads = true }))
	ctx := testCtx(t)
	createRegisters(t, ctx, c.Leader(), []string{"x"})
	rec := &recorder{start: time.Now()}
	leader := c.Leader()
	follower := c.Followers()[0]
	rec.register(t, ctx, 0, leader, regInput{key: "x", write: true, value: "1"})
	c.WaitApplied(leader.AppliedIndex())
	c.IsolateMember(c.Index(follower.ID()))
	rec.register(t, ctx, 0, leader, regInput{key: "x", write: true, value: "2"})
	rec.register(t, ctx, 1, follower, regInput{key: "x"}) // stale: "1"

	if res := porcupine.CheckOperationsTimeout(registerModel, rec.ops, 10*time.Second); res != porcupine.Illegal {
		t.Errorf("history with a stale follower read is %s, want Illegal; history %+v", res, rec.ops)
	}
}
