package checker

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
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

// generatePathological is one key whose search explodes: after a create,
// writers concurrent cas operations of unknown outcome race from the same
// expected value, and a read then returns a value none of them wrote. To
// refute the read, porcupine must try every subset of the writers that may
// have taken effect, with every winner: writers × 2^writers states. The
// history is not linearizable, but no checker can show it in bounded time
// once writers is large.
func generatePathological(key string, writers int, firstID uint64) []history.Op {
	ops := []history.Op{{Process: 0, Func: FuncCreate, Key: key, Value: "v0", Status: history.StatusOK, Invoke: 0, Return: 10}}
	for i := range writers {
		ops = append(ops, history.Op{
			Process: i + 1, Func: FuncCAS, Key: key, Expect: "v0", Value: fmt.Sprintf("w%d", i),
			Status: history.StatusUnknown, Error: "timeout", Invoke: int64(20 + i), Return: math.MaxInt64,
		})
	}
	ops = append(ops, history.Op{Process: writers + 1, Func: FuncGet, Key: key, Status: history.StatusOK,
		Found: true, Output: "never-written", Invoke: int64(100 + writers), Return: int64(200 + writers)})
	for i := range ops {
		ops[i].ID = firstID + uint64(i)
	}
	return ops
}

// runConfig shapes a generated pods run (generateRun).
type runConfig struct {
	Seed uint64
	// Events is the number of events to generate, roughly: register
	// operations, API calls, ledger entries, store changes, faults and logs
	// together.
	Events int
	// RegisterShare is the share of Events that are register operations.
	RegisterShare float64
	Nodes, Zones  int
	// Sets × Replicas pets (with a volume each) and ReplicaSets × Members
	// replicas (without) cycle through create, schedule, start, crashes,
	// delete with a grace period, TERM (KILL for some), exit and removal.
	Sets, Replicas       int
	ReplicaSets, Members int
	// Faults are partition-node intervals spread over the run.
	Faults int
	// Scale is the cluster clock's speed (time scale).
	Scale int64
}

// runBenchConfig is a run of 1,000,000 events in the proportions of a real
// pets run with a register workload beside it.
var runBenchConfig = runConfig{
	Seed: 2026, Events: 1_000_000, RegisterShare: 0.2,
	Nodes: 30, Zones: 3, Sets: 100, Replicas: 3, ReplicaSets: 50, Members: 4,
	Faults: 20, Scale: 50,
}

// runGen accumulates a generated run.
type runGen struct {
	cfg   runConfig
	rng   *rand.Rand
	h     history.History
	uids  int
	token int64
}

// generateRun simulates a correct pods run: every pod instance is created by
// its controller, bound, started, written (pets), perhaps crashed and
// restarted after the back-off, deleted with a grace period it honours, and
// removed by its kubelet before its successor is created; nodes heartbeat;
// faults come and go without effect. So every checker must find it clean.
// Events are in the orders history.Load gives. It is deterministic for a
// seed.
func generateRun(cfg runConfig) *history.History {
	// The last instances and the heartbeats come on top of the pods'
	// cycles: move the aim until the total is within 2%, or keep the
	// closest.
	aim := cfg.Events
	var best *history.History
	off := func(h *history.History) int { return max(events(h)-cfg.Events, cfg.Events-events(h)) }
	for range 8 {
		h := generateRunAiming(cfg, aim)
		if best == nil || off(h) < off(best) {
			best = h
		}
		if off(best) <= cfg.Events/50 {
			break
		}
		aim += cfg.Events - events(h)
	}
	return best
}

func generateRunAiming(cfg runConfig, aim int) *history.History {
	g := &runGen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x9075))}
	nRegister := int(float64(cfg.Events) * cfg.RegisterShare)
	keys := max(1, nRegister/100)
	g.h.Ops = generateRegister(genConfig{Seed: cfg.Seed, Keys: keys, ClientsPerKey: 3, OpsPerKey: nRegister / keys,
		UnknownRate: 0.02, UnavailableRate: 0.01, Latency: 5 * time.Millisecond})

	type ident struct {
		name, owner, identity string
		pet                   bool
		ord                   int
		t                     int64 // when its next instance is created
	}
	var idents []*ident
	for s := range cfg.Sets {
		set := fmt.Sprintf("db%d", s)
		g.store(0, history.StoreAdded, "statefulsets.apps", set,
			fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":%q,"namespace":"bench","uid":"owner-%s"},"spec":{"replicas":%d},"status":{"replicas":%[3]d,"readyReplicas":%[3]d}}`, set, set, cfg.Replicas))
		for r := range cfg.Replicas {
			idents = append(idents, &ident{name: fmt.Sprintf("%s-%d", set, r), owner: set, identity: identityPet, pet: true, ord: r})
		}
	}
	for s := range cfg.ReplicaSets {
		rs := fmt.Sprintf("web%d-5d8f", s)
		for range cfg.Members {
			idents = append(idents, &ident{owner: rs, identity: identityReplicaSet})
		}
	}
	for i, id := range idents {
		id.t = int64(i) * int64(time.Millisecond)
	}
	for n := range cfg.Nodes {
		g.store(0, history.StoreAdded, "nodes", g.node(n), g.nodeJSON(n, 0))
	}

	// Leave room for the last instances, about one more round.
	target := aim - len(g.h.Ops)
	instances := 0
	room := func() bool {
		if instances == 0 {
			return true
		}
		return g.size()+g.size()*len(idents)/instances < target
	}
	for room() {
		for _, id := range idents {
			if id.name == "" || !id.pet {
				id.name = fmt.Sprintf("%s-%s", id.owner, g.suffix())
			}
			id.t = g.instance(id.t, id.name, id.owner, id.identity, id.pet, id.ord, 0)
			instances++
			if !room() {
				break
			}
		}
	}
	// Every pod runs at the end: a last instance each, never deleted.
	end := int64(0)
	for _, id := range idents {
		end = max(end, id.t+int64(time.Second))
	}
	for _, id := range idents {
		if !id.pet {
			id.name = fmt.Sprintf("%s-%s", id.owner, g.suffix())
		}
		g.instance(id.t, id.name, id.owner, id.identity, id.pet, id.ord, end)
	}
	// Node heartbeats and leases every second of wall time, faults
	// spread over the run.
	for t := int64(time.Second); t < end; t += int64(time.Second) {
		for n := range cfg.Nodes {
			g.api(t+int64(n)*int64(time.Millisecond), kubeletIdentityStart+g.node(n), "update", "coordination.k8s.io", "leases", "kube-node-lease", g.node(n), nil, "")
			g.store(t+int64(n)*int64(time.Millisecond)+int64(time.Millisecond), history.StoreModified, "nodes", g.node(n), g.nodeJSON(n, t))
		}
	}
	for f := range cfg.Faults {
		start := end * int64(2*f+1) / int64(2*cfg.Faults+1)
		stop := start + min(int64(5*time.Second), end/int64(4*cfg.Faults+4))
		node := g.node(f % cfg.Nodes)
		g.h.Nemesis = append(g.h.Nemesis, history.Interval{ID: uint64(f + 1), Name: "partition-node", Description: "cut node " + node + " from the control plane",
			Targets: []string{node}, Start: start, End: stop, Healed: true,
			StartWall: wallBase.Add(time.Duration(start)), EndWall: wallBase.Add(time.Duration(stop))})
	}
	g.h.Logs = append(g.h.Logs, history.LogEntry{Msg: "cluster started", T: 0, Wall: wallBase},
		history.LogEntry{Msg: "workload finished; all faults healed", T: end, Wall: wallBase.Add(time.Duration(end))})

	sort.SliceStable(g.h.API, func(i, j int) bool { return g.h.API[i].Invoke < g.h.API[j].Invoke })
	sort.SliceStable(g.h.Ledger, func(i, j int) bool { return g.h.Ledger[i].T < g.h.Ledger[j].T })
	sort.SliceStable(g.h.Store, func(i, j int) bool { return g.h.Store[i].T < g.h.Store[j].T })
	for i := range g.h.Store {
		g.h.Store[i].RV = fmt.Sprint(i + 1)
	}
	g.h.End = end
	for _, o := range g.h.Ops {
		if o.Return != math.MaxInt64 {
			g.h.End = max(g.h.End, o.Return)
		}
	}
	return &g.h
}

// size is the number of events so far besides register operations.
func (g *runGen) size() int {
	return len(g.h.API) + len(g.h.Ledger) + len(g.h.Store)
}

func (g *runGen) node(n int) string { return fmt.Sprintf("node-%d", n) }

func (g *runGen) suffix() string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = letters[g.rng.IntN(len(letters))]
	}
	return string(b)
}

const ms = int64(time.Millisecond)

// instance plays one pod instance from its creation at t and returns when
// its successor may be created. With until set, the instance runs until
// then and is not deleted.
func (g *runGen) instance(t int64, name, owner, identity string, pet bool, ord int, until int64) int64 {
	g.uids++
	uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", g.uids, g.uids)
	n := g.rng.IntN(g.cfg.Nodes)
	node := g.node(n)
	kubelet := kubeletIdentityStart + node
	grace := int64(1 + g.rng.IntN(30))
	p := podJSON{name: name, uid: uid, owner: owner, pet: pet, ord: ord, grace: grace}

	// statusPatch records the kubelet's patch of the pod's status at t and
	// the store's change to p a millisecond later.
	statusPatch := func() {
		g.api(t, kubelet, "patch", "", "pods", "bench", name, nil, "")
		g.h.API[len(g.h.API)-1].Subresource = "status"
		g.store(t+ms, history.StoreModified, "pods", name, p.render())
	}

	g.api(t, identity, "create", "", "pods", "bench", name, nil, uid)
	g.store(t+ms, history.StoreAdded, "pods", name, p.render())
	t += 3 * ms
	g.api(t, "scheduler", "create", "", "pods", "bench", name, nil, "")
	g.h.API[len(g.h.API)-1].Subresource = "binding"
	p.node, p.scheduled = node, true
	g.store(t+ms, history.StoreModified, "pods", name, p.render())
	t += 5 * ms
	p.initialized = true
	statusPatch()
	t += 10 * ms
	g.ledger(t, node, name, uid, history.LedgerStart, 0)
	t += ms
	p.phase, p.ready = "Running", true
	statusPatch()

	// It runs 10 to 60 s of cluster time, a pet writing its volume every
	// second of it.
	life := int64(10+g.rng.IntN(50)) * int64(time.Second) / g.cfg.Scale
	if until > 0 {
		life = until - t
	}
	if pet {
		g.token++
	}
	run := func(d int64) {
		if pet {
			tick := int64(time.Second) / g.cfg.Scale
			for w := t + tick; w < t+d; w += tick {
				g.ledger(w, node, name, uid, history.LedgerWrite, 0)
				e := &g.h.Ledger[len(g.h.Ledger)-1]
				e.Volume, e.Token = "bench.data-"+name, g.token
			}
		}
		t += d
	}
	// One instance in five crashes one to three times, and its kubelet
	// restarts it after the back-off: 10 s, 20 s, 40 s of cluster time.
	crashes := 0
	if until == 0 && g.rng.IntN(5) == 0 {
		crashes = 1 + g.rng.IntN(3)
	}
	for c := range crashes {
		run(life / int64(crashes+1))
		g.ledger(t, node, name, uid, history.LedgerExit, 0)
		g.h.Ledger[len(g.h.Ledger)-1].ExitCode = 1
		t += ms
		p.ready, p.restarts, p.crashLoop = false, c+1, true
		statusPatch()
		t += (BackoffInitial<<c).Nanoseconds()/g.cfg.Scale + 2*ms
		g.ledger(t, node, name, uid, history.LedgerStart, 0)
		t += ms
		p.ready, p.crashLoop = true, false
		statusPatch()
	}
	run(life / int64(crashes+1))
	if until > 0 {
		return t
	}

	g.api(t, "workload", "delete", "", "pods", "bench", name, &grace, uid)
	p.deleting = true
	g.store(t+ms, history.StoreModified, "pods", name, p.render())
	t += 3 * ms
	g.ledger(t, node, name, uid, history.LedgerTerm, grace)
	if g.rng.IntN(10) == 0 {
		// It ignores TERM: KILL when the grace period is over.
		t += (max(grace, 2)*int64(time.Second) + 10*ms) / g.cfg.Scale
		g.ledger(t, node, name, uid, history.LedgerKill, grace)
	} else {
		t += int64(g.rng.Int64N(max(grace, 2)*int64(time.Second))) / g.cfg.Scale
	}
	t += ms
	g.ledger(t, node, name, uid, history.LedgerExit, 0)
	t += ms
	p.ready, p.terminated = false, true
	statusPatch()
	t += 3 * ms
	zero := int64(0)
	g.api(t, kubelet, "delete", "", "pods", "bench", name, &zero, uid)
	g.store(t+ms, history.StoreDeleted, "pods", name, p.render())
	g.api(t+2*ms, "workload", "get", "", "pods", "bench", name, nil, "")
	g.h.API[len(g.h.API)-1].Code, g.h.API[len(g.h.API)-1].Outcome = 404, history.StatusFail
	return t + 5*ms + int64(g.rng.IntN(20))*ms
}

func (g *runGen) api(t int64, identity, verb, group, resource, ns, name string, grace *int64, uid string) {
	g.h.API = append(g.h.API, history.APICall{
		Identity: identity, Verb: verb, Group: group, Resource: resource, Namespace: ns, Name: name,
		GracePeriodSeconds: grace, UID: uid, Code: 200, Outcome: history.StatusOK,
		Invoke: t, Return: t + ms, T: t + ms,
	})
}

func (g *runGen) ledger(t int64, node, pod, uid string, action history.LedgerAction, grace int64) {
	g.h.Ledger = append(g.h.Ledger, history.LedgerEntry{
		Node: node, Namespace: "bench", Pod: pod, UID: uid, Container: "app", Action: action, Grace: grace,
		Scaled: scaledBase.Add(time.Duration(t * g.cfg.Scale)), Wall: wallBase.Add(time.Duration(t)), T: t,
	})
}

func (g *runGen) store(t int64, typ history.StoreEventType, resource, name, obj string) {
	ns := "bench"
	if resource == "nodes" {
		ns = ""
	}
	g.h.Store = append(g.h.Store, history.StoreEvent{Type: typ, Resource: resource, Namespace: ns, Name: name, Object: []byte(obj), T: t})
}

func (g *runGen) nodeJSON(n int, t int64) string {
	beat := scaledBase.Add(time.Duration(t * g.cfg.Scale)).Format(time.RFC3339)
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q,"labels":{"kubernetes.io/hostname":%q,"topology.kubernetes.io/zone":"zone-%d"}},`+
		`"spec":{},"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"},"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"},"phase":"Running",`+
		`"conditions":[{"type":"MemoryPressure","status":"False","lastHeartbeatTime":%q,"reason":"KubeletHasSufficientMemory"},`+
		`{"type":"Ready","status":"True","lastHeartbeatTime":%q,"reason":"KubeletReady","message":"kubelet is posting ready status"}]}}`,
		g.node(n), g.node(n), n%max(g.cfg.Zones, 1), beat, beat)
}

// podJSON renders a pod object as the store records it, in the shape of a
// real run's (labels, owner, volume, conditions, container statuses).
type podJSON struct {
	name, uid, owner, node, phase                       string
	pet                                                 bool
	ord                                                 int
	grace                                               int64
	scheduled, initialized, ready, terminated, deleting bool
	crashLoop                                           bool
	restarts                                            int
}

func (p podJSON) render() string {
	var b strings.Builder
	kind, labels := "ReplicaSet", fmt.Sprintf(`{"app":%q,"pod-template-hash":"5d8f"}`, p.owner)
	if p.pet {
		kind = "StatefulSet"
		labels = fmt.Sprintf(`{"app":%q,"apps.kubernetes.io/pod-index":"%d","statefulset.kubernetes.io/pod-name":%q}`, p.owner, p.ord, p.name)
	}
	fmt.Fprintf(&b, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"bench","uid":%q,"labels":%s,`+
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":%q,"name":%q,"uid":"owner-%s","controller":true}]`, p.name, p.uid, labels, kind, p.owner, p.owner)
	if p.deleting {
		fmt.Fprintf(&b, `,"deletionTimestamp":"2030-01-01T00:10:00Z","deletionGracePeriodSeconds":%d`, p.grace)
	}
	b.WriteString(`},"spec":{`)
	if p.pet {
		fmt.Fprintf(&b, `"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data-%s"}}],`, p.name)
	}
	fmt.Fprintf(&b, `"containers":[{"name":"app","image":"podsafe.io/sim:1","resources":{}}],"restartPolicy":"Always","terminationGracePeriodSeconds":%d,`, p.grace)
	if p.node != "" {
		fmt.Fprintf(&b, `"nodeName":%q,`, p.node)
	}
	b.WriteString(`"schedulerName":"default-scheduler","priority":0,"preemptionPolicy":"PreemptLowerPriority"},"status":{`)
	phase := p.phase
	if phase == "" {
		phase = "Pending"
	}
	fmt.Fprintf(&b, `"phase":%q,"conditions":[`, phase)
	cond := func(typ string, ok bool) {
		s := "False"
		if ok {
			s = "True"
		}
		fmt.Fprintf(&b, `{"type":%q,"status":%q,"lastTransitionTime":"2030-01-01T00:00:00Z"}`, typ, s)
	}
	cond("PodScheduled", p.scheduled)
	if p.initialized {
		b.WriteByte(',')
		cond("Initialized", true)
		b.WriteByte(',')
		cond("ContainersReady", p.ready)
		b.WriteByte(',')
		cond("Ready", p.ready)
		state := `{"waiting":{"reason":"ContainerCreating"}}`
		switch {
		case p.crashLoop:
			state = `{"waiting":{"reason":"CrashLoopBackOff","message":"back-off restarting failed container"}}`
		case p.terminated:
			state = `{"terminated":{"exitCode":0,"reason":"Completed"}}`
		case p.phase == "Running":
			state = `{"running":{"startedAt":"2030-01-01T00:00:00Z"}}`
		}
		fmt.Fprintf(&b, `],"containerStatuses":[{"name":"app","state":%s,"ready":%t,"restartCount":%d,"image":"podsafe.io/sim:1","started":%t}]`,
			state, p.ready, p.restarts, p.phase == "Running" && !p.terminated && !p.crashLoop)
	} else {
		b.WriteByte(']')
	}
	b.WriteString(`,"qosClass":"BestEffort"}}`)
	return b.String()
}
