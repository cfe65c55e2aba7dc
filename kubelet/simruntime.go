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
	clock  clock.WithTicker
	ledger Ledger

	seq    atomic.Uint64
	mu     sync.Mutex
	cs     map[ContainerID]*simContainer
	closed chan struct{}
	once   sync.Once
}

var (
	_ Runtime        = (*SimRuntime)(nil)
	_ MemoryReporter = (*SimRuntime)(nil)
)

// NewSimRuntime returns a simulated runtime for node. A nil clock is the real
// clock; a nil ledger discards entries.
func NewSimRuntime(node string, clk clock.WithTicker, ledger Ledger) *SimRuntime {
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

	term chan Signal // TERM and KILL requests, buffered
	done chan struct{}

	mu     sync.Mutex
	status ContainerStatus
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
	r.ledger.Record(LedgerEntry{
		Node: r.node, Namespace: cfg.Namespace, Pod: cfg.Pod, UID: cfg.UID, Container: cfg.Container.Name,
		Action: action, ExitCode: code, Scaled: r.clock.Now(), Wall: time.Now(), Grace: grace,
	})
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
	id := ContainerID(r.node + "-" + strconv.FormatUint(r.seq.Add(1), 10))
	c := &simContainer{rt: r, cfg: cfg, script: script, id: id,
		term: make(chan Signal, 4), done: make(chan struct{})}
	c.status = ContainerStatus{ID: id, Namespace: cfg.Namespace, Pod: cfg.Pod, UID: cfg.UID,
		Container: cfg.Container.Name, Init: cfg.Init, Attempt: cfg.Attempt, Running: true,
		StartedAt: r.clock.Now()}
	r.mu.Lock()
	// Keep only the newest exited instance of a container.
	for oid, o := range r.cs {
		if o.cfg.UID == cfg.UID && o.cfg.Container.Name == cfg.Container.Name && !o.running() {
			delete(r.cs, oid)
		}
	}
	r.cs[id] = c
	r.mu.Unlock()
	r.record(&cfg, ActionStart, 0, 0)
	go c.run()
	return id, nil
}

func (c *simContainer) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status.Running
}

func (c *simContainer) run() {
	var runC <-chan time.Time
	if !c.script.Forever {
		t := c.rt.clock.NewTimer(c.script.Run)
		defer t.Stop()
		runC = t.C()
	}
	var stopC <-chan time.Time
	termC := c.term
	for {
		select {
		case <-c.rt.closed:
			return
		case <-runC:
			reason := "Completed"
			if c.script.Exit != 0 {
				reason = "Error"
			}
			c.exit(c.script.Exit, reason)
			return
		case <-stopC:
			c.exit(ExitCodeTerm, "Error")
			return
		case sig := <-termC:
			if sig == SignalKill {
				c.exit(ExitCodeKill, "Error")
				return
			}
			if c.script.IgnoreTerm || stopC != nil {
				continue
			}
			if c.script.StopAfterTerm == 0 {
				c.exit(ExitCodeTerm, "Error")
				return
			}
			t := c.rt.clock.NewTimer(c.script.StopAfterTerm)
			defer t.Stop()
			stopC = t.C()
		}
	}
}

func (c *simContainer) exit(code int, reason string) {
	c.mu.Lock()
	c.status.Running = false
	c.status.ExitCode = code
	c.status.Reason = reason
	c.status.FinishedAt = c.rt.clock.Now()
	c.mu.Unlock()
	c.rt.record(&c.cfg, ActionExit, code, 0)
	close(c.done)
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
func (r *SimRuntime) Signal(ctx context.Context, id ContainerID, sig Signal, grace int64) error {
	c, err := r.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.status.Running {
		return nil
	}
	action := ActionTerm
	if sig == SignalKill {
		action = ActionKill
	}
	// Recorded before delivery, so the ledger never shows an exit caused by
	// a signal ahead of the signal itself.
	r.record(&c.cfg, action, 0, grace)
	select {
	case c.term <- sig:
	default: // enough signals queued; the container is going anyway
	}
	return nil
}

// PreStop implements Runtime: the hook takes the script's preStop time, or
// never ends for prestop=hang, until ctx ends.
func (r *SimRuntime) PreStop(ctx context.Context, id ContainerID) (<-chan error, error) {
	c, err := r.get(id)
	if err != nil {
		return nil, err
	}
	r.record(&c.cfg, ActionPreStopStart, 0, 0)
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
			res <- nil
		case <-c.done:
			res <- fmt.Errorf("preStop of %s: %w", id, ErrNotRunning)
		case <-ctx.Done():
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
		return ProbeFailure, nil
	}
	return c.script.probe(kind, r.clock.Since(st.StartedAt)), nil
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
