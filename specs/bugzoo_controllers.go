package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
)

// Planted bugs of the controllers, the fencing controller and the storage
// server, each a failpoint in the real code path. The API servers refuse a
// force deletion without a licence (PS-9, PS-14), so the first three run
// with the API servers' authority rules bypassed (Scenario.BypassAuthority):
// the checkers must catch the controller's bug on their own. The storage
// server stands alone.
func init() {
	registerBug(Bug{
		Name:        "node-controller-force-deletes",
		Description: "the node lifecycle controller force deletes (grace 0) the pods of a node that stopped heart-beating, terminating ones too, instead of deleting them gracefully (breaks PS-9, PS-11; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/controller/nodeControllerForceDeletes",
		Guarantees:  []string{"PS-9", "PS-11"},
		Checker:     checker.AuthorityChecker,
		// The controller evicts a pod 50 s (lease grace) + 300 s (default
		// toleration) of cluster time after its node went quiet: 7 s of
		// wall time at the default time scale, so the partitions are long.
		// The pet still runs behind the partition when it is force deleted.
		Scenario: Scenario{Workload: "pets", Nemesis: []string{"partition-node"}, BypassAuthority: true,
			NemesisInterval: Duration(11 * time.Second), Duration: Duration(25 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "pet-controller-replaces-early",
		Description: "the pet controller replaces a pet as soon as it begins graceful deletion, force deleting its object to free the name, instead of once the object is gone (breaks PS-11; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/controller/petReplacesEarly",
		Guarantees:  []string{"PS-11"},
		Checker:     checker.AtMostOneChecker,
		// A pet deleted on a partitioned node keeps running: its kubelet
		// never hears of the deletion, whatever the grace, while the
		// replacement starts on another node.
		Scenario: Scenario{Workload: "pets", Nemesis: []string{"partition-node"}, BypassAuthority: true,
			NemesisInterval: Duration(4 * time.Second), Duration: Duration(20 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "fencing-deletes-before-fence",
		Description: "the fencing controller force deletes a node's pods before its agents fenced the node and before it records the fence (breaks PS-14; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/fencing/deletesBeforeFence",
		Guarantees:  []string{"PS-14"},
		Checker:     checker.AuthorityChecker,
		// The first partitioned node that carries a pet is fenced (storage,
		// then power) within half a second of losing its lease; its pets,
		// running or still pending there, are force deleted before any
		// agent acted or the fence was recorded.
		Scenario: Scenario{Workload: "pets", Nemesis: []string{"partition-node"}, Fencing: true, BypassAuthority: true,
			NemesisInterval: Duration(4 * time.Second), Duration: Duration(15 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "storage-accepts-fenced-writes",
		Description: "the storage server accepts the writes of a node it was told to fence (breaks PS-15, PS-14; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/cluster/storage/acceptFencedWrites",
		Guarantees:  []string{"PS-15", "PS-14"},
		Checker:     checker.StorageChecker,
		// Fenced at the storage only: the old pet on the partitioned node
		// keeps running and writing after its replacement took the volume
		// over, and only the storage stands between them.
		Scenario: Scenario{Workload: "pets", Nemesis: []string{"partition-node"}, Fencing: true,
			FenceAgents: []string{"storage"}, NemesisInterval: Duration(4 * time.Second), Duration: Duration(15 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "storage-accepts-stale-tokens",
		Description: "a storage that compares fencing tokens forgets to, and accepts a superseded attachment's writes after its successor's (breaks PS-15; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/cluster/storage/acceptStaleTokens",
		Guarantees:  []string{"PS-15"},
		Checker:     checker.StorageChecker,
		// The storage-accepts-fenced-writes scenario with that bug planted
		// too, on a storage comparing fencing tokens: the fence no longer
		// stops the old pet's writes, only the token does. Without this
		// bug, the clean run shows the tokens alone keep PS-15.
		Scenario: Scenario{Workload: "pets", Nemesis: []string{"partition-node"}, Fencing: true,
			FenceAgents: []string{"storage"}, Bugs: []string{"storage-accepts-fenced-writes"},
			Policies:        Policies{StorageFencingTokens: true},
			NemesisInterval: Duration(4 * time.Second), Duration: Duration(15 * time.Second), Seed: 1},
	})
}
