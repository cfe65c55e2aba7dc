package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
)

// Planted bugs of the scheduler: preemption's victim selection and the
// topology spread plugin's node eligibility and pod counting. Each is a
// failpoint in the real code path.
func init() {
	registerBug(Bug{
		Name:        "scheduler-preempts-equal-priority",
		Description: "preemption takes pods of the preemptor's own priority as victims, not only lower ones (breaks PR-10; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/scheduler/framework/preemptsEqualPriority",
		Guarantees:  []string{"PR-10"},
		Checker:     checker.PreemptionChecker,
		// The priority workload fills its slots at once, oversubscribing
		// the nodes with pods of four classes: within a second or so a
		// pending pod finds every node full of pods of its own class (the
		// first catch comes within 5 s, mostly within 1 s).
		Scenario: Scenario{Workload: "priority", Duration: Duration(15 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "scheduler-ignores-missing-topology-key",
		Description: "the topology spread filter admits nodes that lack a DoNotSchedule constraint's topology key (breaks TS-5; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread/ignoresMissingTopologyKey",
		Guarantees:  []string{"TS-5"},
		Checker:     checker.SpreadChecker,
		// One node has no zone label: pods spread over zones may never go
		// there, and as the least loaded node it is where the bug puts the
		// sets' first pods, mostly within a second.
		Scenario: Scenario{Workload: "spread", Topology: zonelessNodeTopology(),
			Duration: Duration(10 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "scheduler-counts-other-namespaces",
		Description: "the topology spread plugin counts the matching pods of every namespace, not only the incoming pod's (breaks TS-6; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread/countsOtherNamespaces",
		Guarantees:  []string{"TS-6", "TS-2"},
		Checker:     checker.SpreadChecker,
		// The spread workload's neighbours in a second namespace carry the
		// labels of its sets and bare pods and are pinned to the first zone:
		// counted by mistake, they drive the sets' pods into the other zone
		// beyond maxSkew. The checker excuses any placement some state of
		// the last seconds allows, so the skew must stand a while before a
		// scale or a replacement binds one more pod there: the first catch
		// comes 6 to 11 s into a run.
		Scenario: Scenario{Workload: "spread", Duration: Duration(20 * time.Second), Seed: 1},
	})
}

// zonelessNodeTopology is three members and four nodes: two zones of
// one node or two, and node-3 with a hostname but no zone label.
func zonelessNodeTopology() cluster.Topology {
	t := cluster.DefaultTopology(3, 3, 2)
	t.Nodes = append(t.Nodes, cluster.NodeSpec{Name: "node-3", Labels: map[string]string{cluster.LabelHostname: "node-3"}})
	return t
}
