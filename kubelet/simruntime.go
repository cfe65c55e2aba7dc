package kubelet

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// SimRuntime is an in-process Runtime whose containers follow their Script
// on a (scaled) clock instead of running processes. It belongs to a node, not
// to a kubelet: its containers keep running while the node's kubelet is
// stopped. Every start, signal, preStop and exit goes to its ledger. Safe for
// concurrent use.
type SimRuntime struct {
	node   string
	clock  clock.WithTickerAndDelayedExecution
	ledger Ledger

	seq     atomic.Uint64
	mu      sync.Mutex
	cs      map[ContainerID]*simContainer
	off     bool    // powered off: nothing starts until PowerOn
	storage Storage // where write= containers write; nil: nowhere
	closed  chan struct{}
	once    sync.Once
}

var (
	_ Runtime        = (*SimRuntime)(nil)
	_ MemoryReporter = (*SimRuntime)(nil)
)

// NewSimRuntime returns a simulated runtime for node. A nil clock is the real
// clock; a nil ledger discards entries.
func NewSimRuntime(node string, clk clock.WithTickerAndDelayedExecution, ledger Ledger) *SimRuntime {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if ledger == nil {
		ledger = discardLedger{}
	}
	return &SimRuntime{node: node, clock: clk, ledger: ledger,
		cs: map[ContainerID]*simContainer{}, closed: make(chan struct{})}
}

type simContainer struct {
	rt     *SimRuntime
	cfg    ContainerConfig
	script Script
	id     ContainerID

	done chan struct{} // closed once it exited

	// The container's process is timers rather than a goroutine: run ends
	// it after the script's run time, stop after a TERM it obeys late.
	// Guarded by mu.
	run, stop clock.Timer
	stopping  bool // a TERM is being obeyed (stop is set)

	mu     sync.Mutex
	status ContainerStatus
	onExit []func(ContainerStatus) // see OnExit; guarded by mu

	// log is this instance's log, previous the one of the instance it
	// replaced (nil for the first); seq orders instances of one attempt.
	log, previous *containerLog
	seq, prevSeq  uint64
	probes        map[ProbeKind]ProbeResult // the last result of each probe; guarded by mu
}

// Close stops every container's simulation without recording exits, as if
// the node vanished with the test. Further calls fail with ErrRuntimeClosed.
func (r *SimRuntime) Close() {
	r.once.Do(func() { close(r.closed) })
}

func (r *SimRuntime) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

func (r *SimRuntime) record(cfg *ContainerConfig, action LedgerAction, code int, grace int64) {
	r.recordEntry(cfg, LedgerEntry{Action: action, ExitCode: code, Grace: grace})
}

// recordEntry records e with the container's identity and the times filled
// in.
func (r *SimRuntime) recordEntry(cfg *ContainerConfig, e LedgerEntry) {
	e.Node, e.Namespace, e.Pod, e.UID, e.Container = r.node, cfg.Namespace, cfg.Pod, cfg.UID, cfg.Container.Name
	e.Scaled, e.Wall = r.clock.Now(), time.Now()
	r.ledger.Record(e)
}

// Start implements Runtime. A container whose script does not parse is not
// started.
func (r *SimRuntime) Start(ctx context.Context, cfg ContainerConfig) (ContainerID, error) {
	if r.isClosed() {
		return "", ErrRuntimeClosed
	}
	script, err := ContainerScript(cfg.Annotations, &cfg.Container)
	if err != nil {
		return "", err
	}
	seq := r.seq.Add(1)
	id := ContainerID(r.node + "-" + strconv.FormatUint(seq, 10))
	c := &simContainer{rt: r, cfg: cfg, script: script, id: id, done: make(chan struct{}), seq: seq, log: newContainerLog()}
	c.status = ContainerStatus{ID: id, Namespace: cfg.Namespace, Pod: cfg.Pod, UID: cfg.UID,
		Container: cfg.Container.Name, Init: cfg.Init, Attempt: cfg.Attempt, Running: true,
		StartedAt: r.clock.Now()}
	r.mu.Lock()
	if r.off {
		r.mu.Unlock()
		return "", fmt.Errorf("node %s: %w", r.node, ErrPoweredOff)
	}
	// Keep only the newest exited instance of a container; its log is the
	// new one's previous (kubectl logs --previous).
	for oid, o := range r.cs {
		if o.cfg.UID == cfg.UID && o.cfg.Container.Name == cfg.Container.Name && !o.running() {
			if c.previous == nil || o.seq > c.prevSeq {
				c.previous = o.log
				c.prevSeq = o.seq
			}
			delete(r.cs, oid)
		}
	}
	r.cs[id] = c
	c.log.add(r.clock.Now(), "%s", startLine(&cfg, script))
	storage := r.storage
	// Recorded under the lock, so a power-off never precedes the start.
	r.record(&cfg, ActionStart, 0, 0)
	r.mu.Unlock()
	c.begin()
	if script.WriteEvery > 0 && len(cfg.Volumes) > 0 && storage != nil {
		go c.write(storage)
	}
	return id, nil
}

// write makes the container's storage writes (script word write=) while it
// runs: every WriteEvery, one write to each of its volumes, carrying the
// volume's attachment token. A write in flight when the container dies is
// abandoned, though the server may still have received it, as with any
// network storage.
func (c *simContainer) write(storage Storage) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.done:
		case <-c.rt.closed:
		}
		cancel()
	}()
	t := c.rt.clock.NewTicker(c.script.WriteEvery)
	defer t.Stop()
	var seq int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		for _, v := range c.cfg.Volumes {
			seq++
			wctx, wcancel := context.WithTimeout(ctx, writeTimeout)
			err := storage.Write(wctx, StorageWrite{Volume: v.Volume, Node: c.rt.node, Namespace: c.cfg.Namespace,
				Pod: c.cfg.Pod, UID: c.cfg.UID, Container: c.cfg.Container.Name, Token: v.Token, Seq: seq})
			wcancel()
			if err != nil && ctx.Err() == nil {
				c.log.add(c.rt.clock.Now(), "write %d to volume %s failed: %v", seq, v.Volume, err)
			}
		}
	}
}

// writeTimeout bounds one storage write in wall time.
const writeTimeout = 5 * time.Second

// SetStorage makes containers started from now on with a write= script
// write to s.
func (r *SimRuntime) SetStorage(s Storage) {
	r.mu.Lock()
	r.storage = s
	r.mu.Unlock()
}

// PowerOff cuts the node's power: every running container stops at once
// (recorded as power-off, then an exit with code 137 and reason PowerOff),
// no signal, no preStop, and the runtime forgets every container, as a
// rebooted machine would. Nothing starts until PowerOn. It returns once every
// container has stopped, so a power fence can be confirmed.
func (r *SimRuntime) PowerOff() {
	r.mu.Lock()
	r.off = true
	cs := make([]*simContainer, 0, len(r.cs))
	for _, c := range r.cs {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	for _, c := range cs {
		c.mu.Lock()
		running := c.status.Running
		if running {
			r.record(&c.cfg, ActionPowerOff, 0, 0)
		}
		c.mu.Unlock()
		if running {
			c.exit(ExitCodeKill, "PowerOff")
		}
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-r.closed:
		}
	}
	r.mu.Lock()
	clear(r.cs)
	r.mu.Unlock()
}

// PowerOn restores power: the runtime starts containers again, with none
// left from before.
func (r *SimRuntime) PowerOn() {
	r.mu.Lock()
	r.off = false
	r.mu.Unlock()
}

// PoweredOff reports whether the node is powered off.
func (r *SimRuntime) PoweredOff() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.off
}

func (c *simContainer) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.Running
}

// begin starts the container's run time: it exits by itself when the
// script's run time has passed, unless it runs forever.
func (c *simContainer) begin() {
	if c.script.Forever {
		return
	}
	reason := "Completed"
	if c.script.Exit != 0 {
		reason = "Error"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.run = c.rt.clock.AfterFunc(c.script.Run, func() { c.exit(c.script.Exit, reason) })
}

// signal delivers sig to the running container (c.mu held) and reports
// whether the container exits of it now; a TERM it obeys late arms stop.
func (c *simContainer) signalLocked(sig Signal) (exitNow bool) {
	switch {
	case sig == SignalKill:
		return true
	case c.script.IgnoreTerm || c.stopping:
		return false
	case c.script.StopAfterTerm == 0:
		return true
	default:
		c.stopping = true
		c.stop = c.rt.clock.AfterFunc(c.script.StopAfterTerm, func() { c.exit(ExitCodeTerm, "Error") })
		return false
	}
}

// exit ends the container with code, once: a later call (a timer racing a
// KILL) does nothing. Once the runtime is closed nothing exits, as when the
// node vanished with the test.
func (c *simContainer) exit(code int, reason string) {
	c.mu.Lock()
	if !c.status.Running || c.rt.isClosed() {
		c.mu.Unlock()
		return
	}
	for _, t := range []clock.Timer{c.run, c.stop} {
		if t != nil {
			t.Stop()
		}
	}
	c.status.Running = false
	c.status.ExitCode = code
	c.status.Reason = reason
	c.status.FinishedAt = c.rt.clock.Now()
	st, onExit := c.status, c.onExit
	c.onExit = nil
	c.mu.Unlock()
	c.log.add(st.FinishedAt, "exited with code %d (%s)", code, reason)
	c.log.end()
	c.rt.record(&c.cfg, ActionExit, code, 0)
	close(c.done)
	for _, f := range onExit {
		f(st)
	}
}

// OnExit implements ExitNotifier: f gets the container's final status once it
// exits (at once if it has), unless the runtime is closed first, as Wait
// would return it.
func (r *SimRuntime) OnExit(id ContainerID, f func(ContainerStatus)) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.status.Running {
		c.onExit = append(c.onExit, f)
		c.mu.Unlock()
		return nil
	}
	st := c.status
	c.mu.Unlock()
	<-c.done // exit closes it right after the status is final
	f(st)
	return nil
}

func (r *SimRuntime) get(id ContainerID) (*simContainer, error) {
	if r.isClosed() {
		return nil, ErrRuntimeClosed
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.cs[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, ErrNoContainer)
	}
	return c, nil
}

// Signal implements Runtime. The signal is recorded when it is delivered to a
// running container.
func (r *SimRuntime) Signal(ctx context.Context, id ContainerID, sig Signal, grace int64, reason KillReason) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if !c.status.Running {
		c.mu.Unlock()
		return nil
	}
	action := ActionTerm
	if sig == SignalKill {
		action = ActionKill
	}
	// Recorded before delivery, so the ledger never shows an exit caused by
	// a signal ahead of the signal itself.
	r.recordEntry(&c.cfg, LedgerEntry{Action: action, Grace: grace, Reason: reason})
	code := ExitCodeTerm
	if sig == SignalKill {
		code = ExitCodeKill
	}
	c.log.add(r.clock.Now(), "%s", signalLine(sig, grace, c.script, c.stopping))
	if c.signalLocked(sig) {
		c.mu.Unlock()
		c.exit(code, "Error")
		return nil
	}
	c.mu.Unlock()
	return nil
}

// PreStop implements Runtime: the hook takes the script's preStop time, or
// never ends for prestop=hang, until ctx ends.
func (r *SimRuntime) PreStop(ctx context.Context, id ContainerID, reason KillReason) (<-chan error, error) {
	c, err := r.get(id)
	if err != nil {
		return nil, err
	}
	r.recordEntry(&c.cfg, LedgerEntry{Action: ActionPreStopStart, Reason: reason})
	c.log.add(r.clock.Now(), "preStop hook started")
	var t clock.Timer
	var hookC <-chan time.Time
	if !c.script.PreStopHang {
		t = r.clock.NewTimer(c.script.PreStop)
		hookC = t.C()
	}
	res := make(chan error, 1)
	go func() {
		defer r.record(&c.cfg, ActionPreStopEnd, 0, 0)
		if t != nil {
			defer t.Stop()
		}
		select {
		case <-hookC:
			c.log.add(r.clock.Now(), "preStop hook finished")
			res <- nil
		case <-c.done:
			res <- fmt.Errorf("preStop of %s: %w", id, ErrNotRunning)
		case <-ctx.Done():
			c.log.add(r.clock.Now(), "preStop hook cut short: %v", ctx.Err())
			res <- fmt.Errorf("preStop of %s: %w", id, ctx.Err())
		case <-r.closed:
			res <- ErrRuntimeClosed
		}
	}()
	return res, nil
}

// Probe implements Runtime from the container's script.
func (r *SimRuntime) Probe(ctx context.Context, id ContainerID, kind ProbeKind) (ProbeResult, error) {
	c, err := r.get(id)
	if err != nil {
		return ProbeUnknown, err
	}
	c.mu.Lock()
	st := c.status
	c.mu.Unlock()
	if !st.Running {
		r.recordEntry(&c.cfg, LedgerEntry{Action: ActionProbe, Probe: kind, Result: ProbeFailure})
		return ProbeFailure, nil
	}
	res := c.script.probe(kind, r.clock.Since(st.StartedAt))
	// Every answer is in the ledger: what the kubelet did with it is
	// judged against it (LC-9).
	r.recordEntry(&c.cfg, LedgerEntry{Action: ActionProbe, Probe: kind, Result: res})
	c.mu.Lock()
	last, seen := c.probes[kind]
	if c.probes == nil {
		c.probes = map[ProbeKind]ProbeResult{}
	}
	c.probes[kind] = res
	c.mu.Unlock()
	if !seen || last != res {
		// The log shows each probe's first result and every change, not
		// every probe.
		c.log.add(r.clock.Now(), "%s probe: %s", kind, res)
	}
	return res, nil
}

// Wait implements Runtime.
func (r *SimRuntime) Wait(ctx context.Context, id ContainerID) (ContainerStatus, error) {
	c, err := r.get(id)
	if err != nil {
		return ContainerStatus{}, err
	}
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.status, nil
	case <-ctx.Done():
		return ContainerStatus{}, ctx.Err()
	case <-r.closed:
		return ContainerStatus{}, ErrRuntimeClosed
	}
}

// List implements Runtime.
func (r *SimRuntime) List(ctx context.Context) ([]ContainerStatus, error) {
	if r.isClosed() {
		return nil, ErrRuntimeClosed
	}
	r.mu.Lock()
	cs := make([]*simContainer, 0, len(r.cs))
	for _, c := range r.cs {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	out := make([]ContainerStatus, 0, len(cs))
	for _, c := range cs {
		c.mu.Lock()
		out = append(out, c.status)
		c.mu.Unlock()
	}
	return out, nil
}

// MemoryUsage implements MemoryReporter from the running containers'
// scripts (mem=).
func (r *SimRuntime) MemoryUsage(ctx context.Context) ([]ContainerMemory, error) {
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ContainerMemory
	for _, st := range list {
		c := r.cs[st.ID]
		if !st.Running || c == nil {
			continue
		}
		out = append(out, ContainerMemory{UID: st.UID, Container: st.Container, Bytes: c.script.Memory})
	}
	return out, nil
}

// Running counts the containers running now.
func (r *SimRuntime) Running() int {
	list, _ := r.List(context.Background())
	n := 0
	for _, c := range list {
		if c.Running {
			n++
		}
	}
	return n
}

// Remove implements Runtime; removing a running container fails.
func (r *SimRuntime) Remove(ctx context.Context, id ContainerID) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	if c.running() {
		return fmt.Errorf("removing %s: container is running", id)
	}
	r.mu.Lock()
	delete(r.cs, id)
	r.mu.Unlock()
	return nil
}
