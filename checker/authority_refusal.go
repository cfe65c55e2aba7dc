package checker

import (
	"fmt"
	"net/http"

	"github.com/podsafe/podsafe/history"
)

// refusalGuarantees are what the API server breaks when it refuses a
// graceful deletion that the rules allow: a graceful DELETE marks the pod
// terminating with its deadline (LC-11), and a later one may only shorten
// it, which is allowed too (PS-3).
var refusalGuarantees = []string{"LC-11", "PS-3"}

// gracefulDeleters are the identities whose components delete pods
// gracefully, and whom podsafe's API server lets do so: admin, the
// workload (an ordinary user), the scheduler (preemption victims) and the
// controllers that only signal termination (PS-9). A kubelet is not among
// them: the node restriction refuses it pods of other nodes, and a fenced
// one everything.
var gracefulDeleters = map[string]bool{
	"admin": true, "workload": true, "scheduler": true,
	"node-controller": true, "pet-controller": true, "replicaset-controller": true,
	"deployment-controller": true, "garbage-collector": true, "namespace-controller": true,
	"podgc": true, identityFencing: true,
}

// refusedGraceful finds the graceful deletions of a pod (a DELETE asking
// for no grace or a grace above 0) by an identity that may delete pods
// gracefully that the API server answered 403 Forbidden. podsafe's
// authority rules refuse a deletion only when it would remove a running
// pod at once (a force deletion), so a graceful one refused means the API
// server turned it into one, or refused a legal request: the pod was not
// marked terminating, or its deadline not shortened, as LC-11 and PS-3
// say. It judges the embedded target only, whose rules these are (on the
// kube target RBAC decides who may delete). why is "" when the history can
// be judged, else why not.
func refusedGraceful(h *history.History, maxEvidence int) (ev []Evidence, illegal, judged int, why string) {
	if h.Meta.Extra[history.ExtraTarget] != history.TargetEmbedded {
		return nil, 0, 0, "not the embedded target, where RBAC decides who may delete"
	}
	for i := range h.API {
		c := &h.API[i]
		if c.Verb != "delete" || !isPodDeletion(c) || isForce(c) || !gracefulDeleters[c.Identity] {
			continue
		}
		judged++
		if c.Code != http.StatusForbidden {
			continue
		}
		illegal++
		if len(ev) < maxEvidence {
			ev = append(ev, Evidence{Key: podRef(c.Namespace, c.Name), At: c.Invoke, API: []history.APICall{*c},
				Description: fmt.Sprintf("%s was refused with 403 (%s): a graceful deletion marks the pod terminating or shortens its deadline, and no rule forbids it", callRef(c), c.Error)})
		}
	}
	return ev, illegal, judged, ""
}
