package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

func init() {
	register("node", loseNode{})
}

// AdminHost is the network host the nemesis makes its admin API calls from
// (deleting a lost node's Node object). No fault cuts it.
const AdminHost = "nemesis"

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
func (loseNode) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (loseNode) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	node := pickNode(c, rng)
	if c.PoweredOff(node) {
		return Injection{}, fmt.Errorf("lose-node: every node is powered off: %w", cluster.ErrPoweredOff)
	}
	wasFenced := fenced(c, node)
	if err := c.PowerOff(node); err != nil {
		return Injection{}, err
	}
	if err := deleteNode(ctx, c, node); err != nil {
		return Injection{}, errors.Join(fmt.Errorf("lose-node: deleting node %s: %w", node, err), c.PowerOn(node))
	}
	return Injection{
		Description: fmt.Sprintf("lose node %s (powered off, Node deleted)", node),
		Targets:     []string{node},
		Heal: func() error {
			if !wasFenced && fenced(c, node) {
				// Fenced while lost: a fence outranks the nemesis, and
				// only an admin unfences.
				return nil
			}
			return c.PowerOn(node)
		},
	}, nil
}

// fenced reports whether a fence agent has fenced node, by the network or
// at the storage. A power fence cannot be told apart from the nemesis'
// power-off, but fencing controllers fence the storage first (PS-15).
func fenced(c *cluster.Cluster, node string) bool {
	if c.Network().Fenced(node) {
		return true
	}
	st, err := c.Storage()
	if err != nil {
		return false
	}
	_, ok := st.Fences()[node]
	return ok
}

// deleteNode deletes node's Node object as admin, retrying while the API is
// unavailable; a node already gone counts as deleted.
func deleteNode(ctx context.Context, c *cluster.Cluster, node string) error {
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: AdminHost, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
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
