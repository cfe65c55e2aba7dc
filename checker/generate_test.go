package checker

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/podsafe/podsafe/history"
)

// genConfig shapes a generated register history.
type genConfig struct {
	Seed          uint64
	Keys          int
	ClientsPerKey int
	OpsPerKey     int
	// UnknownRate is the share of writes and reads whose outcome is lost;
	// half of the lost writes take effect.
	UnknownRate float64
	// UnavailableRate is the share of operations refused outright.
	UnavailableRate float64
	// Latency bounds the time from invoke to the effect, and from the
	// effect to the return.
	Latency time.Duration
}

// generateRegister simulates clients of a linearizable store: each key has
// its own clients, each client runs one operation at a time, and every
// operation takes effect atomically at an instant inside its interval. So
// the history it returns is linearizable by construction. It is
// deterministic for a seed.
func generateRegister(cfg genConfig) []history.Op {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	var all []history.Op
	process := 0
	for k := range cfg.Keys {
		key := fmt.Sprintf("k%04d", k)
		all = append(all, simulateKey(rng, cfg, key, &process)...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Invoke < all[j].Invoke })
	for i := range all {
		all[i].ID = uint64(i + 1)
	}
	return all
}

type simClient struct {
	process int
	seen    string // last value this client saw, the expect of its next cas
	op      history.Op
	effect  int64 // when op takes effect
}

func simulateKey(rng *rand.Rand, cfg genConfig, key string, process *int) []history.Op {
	lat := int64(cfg.Latency)
	var state RegisterState
	version := 0
	clients := make([]*simClient, cfg.ClientsPerKey)
	schedule := func(c *simClient, at int64) {
		c.op = history.Op{Process: c.process, Key: key, Invoke: at}
		switch r := rng.Float64(); {
		case r < 0.35:
			c.op.Func = FuncGet
		case r < 0.55:
			version++
			c.op.Func, c.op.Value = FuncCreate, fmt.Sprintf("v%d", version)
		case r < 0.85:
			version++
			c.op.Func, c.op.Value, c.op.Expect = FuncCAS, fmt.Sprintf("v%d", version), c.seen
		default:
			c.op.Func = FuncDelete
			if rng.IntN(2) == 0 {
				c.op.Expect = c.seen
			}
		}
		c.effect = at + rng.Int64N(lat) + 1
	}
	for i := range clients {
		*process++
		clients[i] = &simClient{process: *process}
		schedule(clients[i], rng.Int64N(lat))
	}
	var out []history.Op
	for len(out) < cfg.OpsPerKey {
		// The client whose operation takes effect first goes next, so
		// effects apply in time order.
		c := clients[0]
		for _, o := range clients[1:] {
			if o.effect < c.effect {
				c = o
			}
		}
		op := &c.op
		ret := c.effect + rng.Int64N(lat) + 1
		switch r := rng.Float64(); {
		case r < cfg.UnavailableRate:
			op.Status, op.Error = history.StatusFail, ErrorUnavailable+": no leader"
		case r < cfg.UnavailableRate+cfg.UnknownRate:
			if op.Func != FuncGet && rng.IntN(2) == 0 {
				state = apply(state, op)
			}
			op.Status, op.Error = history.StatusUnknown, "timeout"
			*process++ // a client that lost track of its operation starts afresh
			c.process = *process
		default:
			state = apply(state, op)
		}
		if op.Status == history.StatusUnknown {
			op.Return = math.MaxInt64
		} else {
			op.Return = ret
		}
		if op.Status == history.StatusOK {
			switch {
			case op.Func == FuncGet && op.Found:
				c.seen = op.Output
			case op.Func == FuncCreate || op.Func == FuncCAS:
				c.seen = op.Value
			}
		}
		out = append(out, *op)
		schedule(c, ret+rng.Int64N(lat/4+1))
	}
	return out
}

// apply performs op at its linearization point on a correct store and
// records the outcome in op.
func apply(s RegisterState, op *history.Op) RegisterState {
	fail := func(class string) RegisterState {
		op.Status, op.Error = history.StatusFail, class
		return s
	}
	op.Status = history.StatusOK
	switch op.Func {
	case FuncGet:
		op.Found, op.Output = s.Present, s.Value
		return s
	case FuncCreate:
		if s.Present {
			return fail(ErrorExists)
		}
		return RegisterState{Present: true, Value: op.Value}
	case FuncCAS:
		switch {
		case !s.Present:
			return fail(ErrorNotFound)
		case s.Value != op.Expect:
			return fail(ErrorConflict)
		}
		return RegisterState{Present: true, Value: op.Value}
	default: // delete
		switch {
		case !s.Present:
			return fail(ErrorNotFound)
		case op.Expect != "" && s.Value != op.Expect:
			return fail(ErrorConflict)
		}
		return RegisterState{}
	}
}
