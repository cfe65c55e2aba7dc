// Package fencing is podsafe's fencing controller (PS-14, PS-15) and the
// interface of the fence agents it drives.
//
// # The controller
//
// Controller resolves node partitions the way the pod-safety proposal
// describes: detect, decide, fence, confirm, and only then force delete.
//
//   - Detect: a node is a candidate when its lease in kube-node-lease (or,
//     without one, its Ready condition's lastHeartbeatTime) is older than
//     Config.Threshold on the controller's clock and the controller has not
//     seen it change for Threshold either (so a renewing kubelet with a
//     lagging clock is not fenced, and a freshly started controller gives
//     every node a full Threshold), or when it carries
//     AnnotationFenceRequest (an admin's request, e.g. for a hung node that
//     still heart-beats).
//   - Decide: a stale node is fenced only if some pod on it justifies it
//     under Config.Policy (DefaultPolicy: pets and pods annotated
//     podsafe.io/fencing=true) — an empty node is not worth a fence — and
//     only while fewer than Config.Budget nodes are fenced and not yet
//     unfenced. A node whose fence an admin requested is fenced whatever
//     runs on it.
//   - Fence and confirm: the controller takes a fresh fence token (a
//     compare-and-swap counter in the Lease kube-system/podsafe-fence-token)
//     and calls every Agent's Fence, in order, with it; the fence is
//     confirmed when every agent returned nil.
//   - Record: Node condition FencedCondition=True (reason Fenced, message
//     "fence token N confirmed by power,storage"), annotation
//     podsafe.io/fence-token, taint podsafe.io/fenced:NoExecute,
//     spec.unschedulable, and an Event.
//   - Force delete: every pod bound to the node (grace 0, UID
//     precondition), with an Event each, and every VolumeAttachment to it.
//     The API server allows the fencing identity both only while the node
//     carries FencedCondition=True.
//
// Every step is idempotent and resumable from the API, so a controller that
// crashed anywhere is simply started again. Nothing but the admin action
// Unfence takes a fence back: a fenced node does not come back by itself.
//
// # Writing an agent
//
// An Agent fences a node by one means: cutting its power (IPMI, a PDU, a
// cloud API's force stop), firewalling it at the storage server, cutting it
// off the network. The controller relies on this contract:
//
//   - Fence returns nil only once the fence is confirmed: the power state
//     read back as off, the firewall rule read back as installed. "Request
//     sent" is not a confirmation; the controller force deletes the node's
//     pods right after, and a process still running then breaks
//     at-most-one.
//   - Fence is idempotent. A controller that crashed after the agent
//     confirmed calls it again, possibly with a larger token; fencing a node
//     already fenced must succeed at once.
//   - Fence honours ctx and returns in bounded time; an error makes the
//     controller retry the whole fence later with a new token, so a
//     transient failure is best returned, not retried forever inside.
//   - The token strictly increases across fences. A storage server that
//     remembers the largest token it saw can refuse requests carrying a
//     smaller one; agents that have no use for it ignore it.
//   - The fence holds until Unfence: a power agent must keep the node off
//     (no automatic power-on after a power loss), a firewall rule must
//     survive the storage server's restart.
//   - Unfence undoes Fence and is idempotent too. Only an admin calls it.
//   - Name is a short constant word without commas or spaces ("ipmi"); it
//     is recorded in the node's condition message.
//   - Methods are safe for concurrent use for different nodes.
//
// An IPMI power agent, for example, could read:
//
//	type IPMI struct {
//		BMC map[string]*bmc.Client // node -> its board management controller
//	}
//
//	func (a *IPMI) Name() string { return "ipmi" }
//
//	func (a *IPMI) Fence(ctx context.Context, node string, token int64) error {
//		c, ok := a.BMC[node]
//		if !ok {
//			return fmt.Errorf("no BMC known for node %s", node)
//		}
//		// Power off is idempotent; never "soft" (ACPI) off, which the
//		// node's operating system may ignore.
//		if err := c.ChassisControl(ctx, bmc.PowerOff); err != nil {
//			return fmt.Errorf("powering off %s: %w", node, err)
//		}
//		// Confirm by reading the state back, never by trusting the request.
//		on, err := c.PowerIsOn(ctx)
//		if err != nil {
//			return fmt.Errorf("reading power state of %s: %w", node, err)
//		}
//		if on {
//			return fmt.Errorf("node %s still powered on", node)
//		}
//		// Keep it off if the rack loses and regains power.
//		return c.SetPowerRestorePolicy(ctx, bmc.AlwaysOff)
//	}
//
//	func (a *IPMI) Unfence(ctx context.Context, node string) error {
//		c, ok := a.BMC[node]
//		if !ok {
//			return fmt.Errorf("no BMC known for node %s", node)
//		}
//		if err := c.SetPowerRestorePolicy(ctx, bmc.Previous); err != nil {
//			return err
//		}
//		return c.ChassisControl(ctx, bmc.PowerOn)
//	}
//
// and is wired in next to the others. Volume attachments are broken only
// after every agent confirmed, so the storage firewall always comes first
// (PS-15) whatever the order; putting the storage agent first cuts the node
// off its volumes soonest:
//
//	ctl, err := fencing.New(fencing.Config{
//		Client: fencingClientset,
//		Agents: []fencing.Agent{storageAgent, &IPMI{BMC: bmcs}},
//	})
//	if err != nil {
//		return err
//	}
//	go ctl.Run(ctx)
package fencing
