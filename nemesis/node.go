package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podsafe/podsafe/target"
)

func init() {
	register("node", loseNode{})
}

// deleteTimeout bounds how long lose-node keeps trying to delete the Node
// (wall time); past it the node is powered on again and the injection fails.
const deleteTimeout = 30 * time.Second

// loseNode loses a machine for good: it is powered off (its kubelet and every
// container on it stop, as the ledger shows) and an admin deletes its Node
// object, which tells the cluster the node will not come back: pod GC may
// then force delete its pods (PS-10) and controllers replace them.
//
// The heal is a replacement machine of the same name: it is powered on
// empty and its kubelet registers a new Node object. A permanent loss would
// be more faithful, but a run with a nemesis every few seconds would soon
// have no nodes left; the fault's interval is the time the node stays lost.
// A heal that comes before pod GC has collected the pods leaves them bound
// to the new node, which then runs them again, as Kubernetes does when a
// node of the same name re-registers; nothing ran twice, since the old
// machine's containers died with its power.
type loseNode struct{}

func (loseNode) Name() string { return "lose-node" }
func (loseNode) Describe() string {
	return "power a random node off and delete its Node object as admin (pod GC may force delete its pods); a replacement of the same name joins on heal"
}
func (loseNode) Needs() []target.Capability { return []target.Capability{target.Power} }

// Available needs a target that switches power (target.PowerSwitch) for some
// node and deletes Node objects as admin (target.NodeAdmin).
func (loseNode) Available(t target.Target) bool {
	_, power := t.(target.PowerSwitch)
	_, admin := t.(target.NodeAdmin)
	return power && admin && len(able(t, target.Power, target.RoleKubelet)) > 0
}
func (loseNode) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	power, ok := t.(target.PowerSwitch)
	admin, ok2 := t.(target.NodeAdmin)
	if !ok || !ok2 {
		return Injection{}, fmt.Errorf("lose-node: %w", target.ErrUnsupported)
	}
	k := pickNode(t, target.Power, rng)
	node := k.Node
	if power.PoweredOff(node) {
		return Injection{}, fmt.Errorf("lose-node: every node is powered off: %w", target.ErrPoweredOff)
	}
	wasFenced := power.Fenced(node)
	if err := power.PowerOff(ctx, node); err != nil {
		return Injection{}, err
	}
	hctx := context.WithoutCancel(ctx)
	if err := deleteNode(ctx, admin, node); err != nil {
		return Injection{}, errors.Join(fmt.Errorf("lose-node: deleting node %s: %w", node, err), power.PowerOn(hctx, node))
	}
	return Injection{
		Description: fmt.Sprintf("lose node %s (powered off, Node deleted)", node),
		Targets:     []string{node},
		Components:  []string{k.Name},
		Params:      map[string]string{"node": node},
		Heal: func() error {
			if !wasFenced && power.Fenced(node) {
				// Fenced while lost: a fence outranks the nemesis, and
				// only an admin unfences.
				return nil
			}
			return power.PowerOn(hctx, node)
		},
	}, nil
}

// deleteNode deletes node's Node object as admin, retrying while the API is
// unavailable; a node already gone counts as deleted.
func deleteNode(ctx context.Context, admin target.NodeAdmin, node string) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		err := admin.DeleteNode(ctx, node)
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !retriable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// retriable reports errors worth retrying while the control plane settles:
// unavailability, timeouts and transport errors; any other answer of the
// API server is final.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: a cut, a crash, a timeout
	}
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err)
}
