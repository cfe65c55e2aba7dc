package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
)

func init() {
	registerBug(Bug{
		Name:        "stale-read",
		Description: "every store member serves reads from its local state without asking the leader (breaks linearizability)",
		Guarantees:  []string{checker.GuaranteeStoreLin},
		Checker:     checker.RegisterChecker,
		// Followers cut off one at a time, often, with many clients: reads
		// served by an isolated follower miss writes acknowledged meanwhile.
		Scenario: Scenario{Workload: "register", Nemesis: []string{"isolate-one"},
			NemesisInterval: Duration(800 * time.Millisecond), Duration: Duration(10 * time.Second),
			Concurrency: 6, Seed: 2},
	})
	registerBug(Bug{
		Name:        "read-skips-apply-wait",
		Description: "the leader answers a linearizable read from its state machine without waiting for it to apply the commit index the read began at (breaks read-after-watch; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/raftstore/readSkipsApplyWait",
		Guarantees:  []string{checker.GuaranteeReadAfterWatch},
		Checker:     checker.ReadAfterWatchChecker,
		// A slowed leader applies every change after the followers have
		// streamed it to their watchers; the register's watchers read what
		// they were delivered over other connections.
		Scenario: Scenario{Workload: "register", Nemesis: []string{"slow-leader"},
			NemesisInterval: Duration(500 * time.Millisecond), Duration: Duration(10 * time.Second),
			Concurrency: 6, Seed: 2},
	})
	registerBug(Bug{
		Name:        "ack-before-sync",
		Description: "a durable store member acknowledges appended raft entries before they are fsynced (they are written back up to a second later), so a power failure of the control plane loses acknowledged writes (breaks linearizability; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/raftstore/ackBeforeSync",
		Guarantees:  []string{checker.GuaranteeStoreLin},
		Checker:     checker.RegisterChecker,
		// Every member crashes at once, every two seconds or so, while
		// clients write: each power failure loses up to the last second of
		// acknowledged entries on every member, and the registers read them
		// again. Many keys at a moderate rate keep the operations left
		// unknown by each outage few per key, so every key can be judged.
		Scenario: Scenario{Workload: "register", Nemesis: []string{"power-failure"}, Durable: true,
			NemesisInterval: Duration(time.Second), Duration: Duration(10 * time.Second),
			Concurrency: 6, Keys: 20, Rate: 100, Seed: 2},
	})
}
