package clientconf

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/cluster"
)

// fault is one step of the schedule: it is injected, held for hold, then
// healed; heal returns once the cluster has a raft leader again.
type fault struct {
	name   string
	inject func(ctx context.Context) (heal func(ctx context.Context) error, err error)
	hold   time.Duration
}

// crashLeader crashes the raft leader's member and restarts it.
func (e *env) crashLeader() fault {
	return fault{name: "crash the raft leader", hold: 5 * time.Second, inject: func(ctx context.Context) (func(context.Context) error, error) {
		if err := e.c.WaitLeader(ctx); err != nil {
			return nil, err
		}
		return e.crash(e.c.LeaderIndex())
	}}
}

// crashInformersMember crashes the member the informers last dialled
// and restarts it.
func (e *env) crashInformersMember(d *dialTracker) fault {
	return fault{name: "crash the informers' member", hold: 5 * time.Second, inject: func(context.Context) (func(context.Context) error, error) {
		i := d.member(e.c.MemberHosts())
		if i < 0 {
			return nil, fmt.Errorf("the informers have dialled no member")
		}
		return e.crash(i)
	}}
}

func (e *env) crash(i int) (func(context.Context) error, error) {
	e.t.Logf("crashing %s", cluster.MemberHost(i))
	if err := e.c.CrashMember(i); err != nil {
		return nil, fmt.Errorf("crashing member %d: %w", i, err)
	}
	return func(ctx context.Context) error {
		if err := e.c.RestartMember(i); err != nil {
			return fmt.Errorf("restarting member %d: %w", i, err)
		}
		return e.c.WaitLeader(ctx)
	}, nil
}

// isolateInformersMember cuts the member the informers last dialled from
// the other members (its raft peers), both ways: the informers still reach
// its API server, which can no longer reach a quorum, so their watches
// fall silent until the partition heals and the member catches up.
func (e *env) isolateInformersMember(d *dialTracker) fault {
	return fault{name: "isolate the informers' member from its peers", hold: 8 * time.Second, inject: func(context.Context) (func(context.Context) error, error) {
		i := d.member(e.c.MemberHosts())
		if i < 0 {
			return nil, fmt.Errorf("the informers have dialled no member")
		}
		e.t.Logf("isolating %s", cluster.MemberHost(i))
		var rest []string
		for j, h := range e.c.MemberHosts() {
			if j != i {
				rest = append(rest, h)
			}
		}
		e.c.Network().Partition([]string{cluster.MemberHost(i)}, rest)
		return func(ctx context.Context) error {
			e.c.Network().HealAll()
			return e.c.WaitLeader(ctx)
		}, nil
	}}
}

// cutInformers cuts the informers' hosts from every member for longer than
// the watch window lasts under the writer's load: their watches resume from
// a resourceVersion the members no longer keep, meet 410 Gone and list
// again, which delivers the deletions they missed as tombstones.
func (e *env) cutInformers(hosts ...string) fault {
	return fault{name: "cut the informers from every member", hold: 10 * time.Second, inject: func(context.Context) (func(context.Context) error, error) {
		var links [][2]string
		for _, host := range hosts {
			for _, h := range e.c.MemberHosts() {
				links = append(links, [2]string{host, h}, [2]string{h, host})
			}
		}
		e.c.Network().CutLinks(links)
		return func(context.Context) error {
			e.c.Network().HealLinks(links)
			return nil
		}, nil
	}}
}

// cutLeaseHolder cuts the replica holding the manager's Lease from every
// member for longer than the lease lasts, so that it loses the lease and
// the other replica takes it.
func (e *env) cutLeaseHolder(replicas []*replica) fault {
	return fault{name: "cut the lease holder's replica from every member", hold: leaseDuration + renewDeadline + 4*time.Second,
		inject: func(ctx context.Context) (func(context.Context) error, error) {
			r, err := e.leaseHolder(ctx, replicas)
			if err != nil {
				return nil, err
			}
			e.t.Logf("cutting replica %s (%s) from the members", r.name, r.identity())
			var links [][2]string
			for _, h := range e.c.MemberHosts() {
				links = append(links, [2]string{r.host, h}, [2]string{h, r.host})
			}
			e.c.Network().CutLinks(links)
			return func(context.Context) error {
				e.c.Network().HealLinks(links)
				return nil
			}, nil
		}}
}

// pauseComponents pauses podsafe's controller-manager and scheduler (as
// SIGSTOP would) and holds the lease holder's traffic for less than its
// renew deadline: it must keep the lease through that.
func (e *env) pauseComponents(replicas []*replica) fault {
	return fault{name: "pause the controller-manager and the scheduler; stall the lease holder briefly", hold: 5 * time.Second,
		inject: func(ctx context.Context) (func(context.Context) error, error) {
			r, err := e.leaseHolder(ctx, replicas)
			if err != nil {
				return nil, err
			}
			for _, comp := range []string{cluster.ComponentControllerManager, cluster.ComponentScheduler} {
				if err := e.c.Pause(comp); err != nil {
					return nil, err
				}
			}
			e.c.Network().HoldHost(r.host)
			time.AfterFunc(2*time.Second, func() { e.c.Network().ReleaseHost(r.host) })
			return func(context.Context) error {
				for _, comp := range []string{cluster.ComponentControllerManager, cluster.ComponentScheduler} {
					if err := e.c.Resume(comp); err != nil {
						return err
					}
				}
				return nil
			}, nil
		}}
}

// leaseHolder finds the replica whose incarnation holds the manager's
// Lease, by a linearizable read, waiting (bounded) for one to hold it.
func (e *env) leaseHolder(ctx context.Context, replicas []*replica) (*replica, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := e.check.CoordinationV1().Leases(testNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil {
			for _, r := range replicas {
				if strings.HasPrefix(*l.Spec.HolderIdentity, r.name+"-") {
					return r, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no replica holds lease %s/%s after a minute (last error: %v)", testNamespace, leaseName, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// inject runs the schedule: each fault in turn, held, healed, with a pause
// between faults for the cluster to settle.
func (e *env) inject(ctx context.Context, faults []fault) error {
	for _, f := range faults {
		start := time.Now()
		heal, err := f.inject(ctx)
		if err != nil {
			return fmt.Errorf("injecting %q: %w", f.name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.hold):
		}
		hctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = heal(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("healing %q: %w", f.name, err)
		}
		e.t.Logf("fault %q: injected and healed in %s", f.name, time.Since(start).Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}
