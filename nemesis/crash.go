package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/podsafe/podsafe/target"
)

// The crash-consistency fault: a power failure of the whole control plane.
// One member's crash can never lose an acknowledged write, since the others
// hold it; every member crashing at once can, if a member acknowledged
// entries it had not yet synced (the bug zoo's ack-before-sync). On the
// embedded cluster every crash loses what the member had not synced (see
// raftstore.Store.Crash), so a run with this fault and the register
// workload is a crash-consistency check: the linearizability checker finds
// an acknowledged write the restarted cluster lost.
func init() {
	register("power-failure", powerFailure{})
}

// powerFailure crashes every running control-plane member at the same
// instant and restarts them all from their disks.
type powerFailure struct{}

func (powerFailure) Name() string { return "power-failure" }
func (powerFailure) Describe() string {
	return "crash every control-plane member at the same instant, losing what they had not synced, and restart them from disk (durable clusters only)"
}
func (powerFailure) Needs() []target.Capability { return needsKill }

// Available needs every member's store to be killable: a member left
// running would keep the entries the others lost.
func (powerFailure) Available(t target.Target) bool {
	if _, ok := t.(target.Processes); !ok || t.Members() == 0 {
		return false
	}
	for i := range t.Members() {
		st, ok := storeOf(t, i)
		if !ok || !t.Can(target.Kill, st.Name) {
			return false
		}
	}
	return true
}

func (powerFailure) Inject(ctx context.Context, t target.Target, _ *rand.Rand) (Injection, error) {
	p, ok := t.(target.Processes)
	if !ok {
		return Injection{}, fmt.Errorf("power-failure: %w", target.ErrUnsupported)
	}
	var stores []string
	for i := range t.Members() {
		// A member down already (another fault's crash) stays that
		// fault's to restart.
		if st, ok := storeOf(t, i); ok && p.Running(st.Name) {
			stores = append(stores, st.Name)
		}
	}
	if len(stores) == 0 {
		return Injection{}, fmt.Errorf("power-failure: %w", target.ErrNotRunning)
	}
	killed, err := killTogether(ctx, p, stores)
	hctx := context.WithoutCancel(ctx)
	restart := func() error {
		var errs []error
		for _, n := range killed {
			errs = append(errs, ignore(p.Restart(hctx, n), target.ErrRunning))
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return Injection{}, errors.Join(err, restart())
	}
	return Injection{
		Description: "power failure of " + strings.Join(stores, ","),
		Targets:     slices.Clone(stores),
		Components:  slices.Clone(stores),
		Heal:        restart,
	}, nil
}

// killTogether kills every one of names at once, each from its own
// goroutine, so that none goes on (and syncs) while another dies. It returns
// the ones killed, in the order of names.
func killTogether(ctx context.Context, p target.Processes, names []string) ([]string, error) {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, n := range names {
		wg.Go(func() {
			<-start
			errs[i] = p.Kill(ctx, n)
		})
	}
	close(start)
	wg.Wait()
	var killed []string
	for i, n := range names {
		if errs[i] == nil {
			killed = append(killed, n)
		} else if errors.Is(errs[i], target.ErrNotRunning) {
			errs[i] = nil // it died meanwhile, of another fault: that fault restarts it
		}
	}
	return killed, errors.Join(errs...)
}
