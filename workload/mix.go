package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// MixSeparator joins the names of workloads run together ("pets+spread").
const MixSeparator = "+"

// Mix runs several workloads at once on one cluster, as "pets+spread"
// names them: each runs in its own namespace with its own share of the
// processes (clients) and its own seed, so a scale run can put pets and
// spread constraints on the same nodes under the same faults. The register
// workload is not mixed: its operations and watchers assume the run is its
// own.
type Mix struct {
	Parts []Workload
}

// lookupMix builds the mix name names, refusing unknown, repeated and
// unmixable parts.
func lookupMix(name string) (*Mix, error) {
	m := &Mix{}
	seen := map[string]bool{}
	for _, part := range strings.Split(name, MixSeparator) {
		switch {
		case part == "":
			return nil, fmt.Errorf("%w %q: a mix names its workloads joined by %q, such as pets+spread", ErrUnknownWorkload, name, MixSeparator)
		case seen[part]:
			return nil, fmt.Errorf("%w %q: %s is named twice", ErrUnknownWorkload, name, part)
		case part == "register":
			return nil, fmt.Errorf("%w %q: the register workload runs alone", ErrUnknownWorkload, name)
		}
		seen[part] = true
		mk, ok := registry[part]
		if !ok {
			return nil, fmt.Errorf("%w %q in %q; choose from %s", ErrUnknownWorkload, part, name, strings.Join(Names(), ", "))
		}
		m.Parts = append(m.Parts, mk())
	}
	return m, nil
}

// Name implements Workload.
func (m *Mix) Name() string {
	names := make([]string, len(m.Parts))
	for i, p := range m.Parts {
		names[i] = p.Name()
	}
	return strings.Join(names, MixSeparator)
}

// Describe implements Workload.
func (m *Mix) Describe() string {
	return "the workloads " + strings.Join(strings.Split(m.Name(), MixSeparator), " and ") + " at once, each with its share of the processes"
}

// Needs implements Workload: what any part needs.
func (m *Mix) Needs() Needs {
	var n Needs
	for _, p := range m.Parts {
		pn := p.Needs()
		n.Kubelets = n.Kubelets || pn.Kubelets
		n.Scheduler = n.Scheduler || pn.Scheduler
		n.Controllers = n.Controllers || pn.Controllers
		n.Fencing = n.Fencing || pn.Fencing
		n.MinNodes = max(n.MinNodes, pn.MinNodes)
		n.Zones = max(n.Zones, pn.Zones)
	}
	return n
}

// SetPlacement implements Placer for the parts that place their pods.
func (m *Mix) SetPlacement(p func(*corev1.PodSpec)) {
	for _, w := range m.Parts {
		if pl, ok := w.(Placer); ok {
			pl.SetPlacement(p)
		}
	}
}

// Run implements Workload: every part at once, the clients dealt out in
// turn (each part needs at least one), each part with a seed of its own.
func (m *Mix) Run(ctx context.Context, env Env) error {
	if len(env.Clients) < len(m.Parts) {
		return fmt.Errorf("workload %s: %d processes for %d workloads: give each at least one (--concurrency)", m.Name(), len(env.Clients), len(m.Parts))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(m.Parts))
	for i, p := range m.Parts {
		part := env
		part.Clients = nil
		for c := i; c < len(env.Clients); c += len(m.Parts) {
			part.Clients = append(part.Clients, env.Clients[c])
		}
		part.Concurrency = len(part.Clients)
		part.Seed = env.Seed ^ (uint64(i+1) * 0x9e3779b97f4a7c15)
		// Process n of part i is recorded as n×parts+i (within the
		// numbering the mix itself was given).
		stride := max(env.Processes.Stride, 1)
		part.Processes = Processes{Stride: stride * len(m.Parts), Offset: env.Processes.of(0) + stride*i}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(ctx, part); err != nil {
				errs[i] = fmt.Errorf("%s: %w", p.Name(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Finish implements Finisher: the final phase of every part that has one,
// all at once.
func (m *Mix) Finish(ctx context.Context, env Env) error {
	var wg sync.WaitGroup
	errs := make([]error, len(m.Parts))
	for i, p := range m.Parts {
		f, ok := p.(Finisher)
		if !ok {
			continue
		}
		wg.Go(func() {
			if err := f.Finish(ctx, env); err != nil {
				errs[i] = fmt.Errorf("%s: %w", p.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
