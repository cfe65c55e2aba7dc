package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// SnapshotCounts counts the raft snapshots of a run's members, from the
// history's snapshot lines (history.LogSnapshotTaken and the others). A
// run where members installed snapshots is judged like any other; the
// count shows that the run exercised them.
type SnapshotCounts struct {
	// Installed counts the snapshots members were sent by the leader
	// because they lagged further behind than its log reached.
	Installed int `json:"installed"`
	// Taken counts the snapshots members took of their own state.
	Taken int `json:"taken"`
	// Restored counts the members' own snapshots restored as they
	// restarted from disk.
	Restored int `json:"restored,omitempty"`
	// Members are the counts of each member that took, installed or
	// restored any, in name order.
	Members []MemberSnapshots `json:"members,omitempty"`
	// Params are the raft parameters the members ran with
	// (history.LogRaftParams), by name.
	Params map[string]string `json:"params,omitempty"`
}

// MemberSnapshots are one member's snapshot counts.
type MemberSnapshots struct {
	Member    string `json:"member"`
	Installed int    `json:"installed"`
	Taken     int    `json:"taken"`
	Restored  int    `json:"restored,omitempty"`
}

// CountSnapshots counts the snapshot lines of h. It returns nil when h does
// not record snapshots (no history.LogRaftParams line: another target, or
// a history written before they were recorded), so that a report tells no
// count from zero. It is pure.
func CountSnapshots(h *history.History) *SnapshotCounts {
	if h == nil {
		return nil
	}
	var c *SnapshotCounts
	byMember := map[string]*MemberSnapshots{}
	member := func(name string) *MemberSnapshots {
		m := byMember[name]
		if m == nil {
			m = &MemberSnapshots{Member: name}
			byMember[name] = m
		}
		return m
	}
	for _, l := range h.Logs {
		switch l.Msg {
		case history.LogRaftParams:
			if c == nil {
				c = &SnapshotCounts{}
			}
			c.Params = l.Attrs
		case history.LogSnapshotInstalled:
			member(l.Attrs["member"]).Installed++
		case history.LogSnapshotTaken:
			member(l.Attrs["member"]).Taken++
		case history.LogSnapshotRestored:
			member(l.Attrs["member"]).Restored++
		}
	}
	if c == nil {
		return nil
	}
	for _, m := range byMember {
		c.Installed += m.Installed
		c.Taken += m.Taken
		c.Restored += m.Restored
		c.Members = append(c.Members, *m)
	}
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Member < c.Members[j].Member })
	return c
}

// String is the count as reports show it: "snapshot installs: 2 (taken:
// 31)", with the restores on restart when there were any.
func (c *SnapshotCounts) String() string {
	if c == nil {
		return "snapshots not recorded"
	}
	s := fmt.Sprintf("snapshot installs: %d (taken: %d", c.Installed, c.Taken)
	if c.Restored > 0 {
		s += fmt.Sprintf(", restored on restart: %d", c.Restored)
	}
	return s + ")"
}

// PerMember is the members' counts in one line: "cp-0 1 installed, 9
// taken; cp-1 …".
func (c *SnapshotCounts) PerMember() string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, m := range c.Members {
		p := fmt.Sprintf("%s %d installed, %d taken", m.Member, m.Installed, m.Taken)
		if m.Restored > 0 {
			p += fmt.Sprintf(", %d restored", m.Restored)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// ParamsLine is the raft parameters in one line, sorted by name.
func (c *SnapshotCounts) ParamsLine() string {
	if c == nil {
		return ""
	}
	names := make([]string, 0, len(c.Params))
	for n := range c.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + "=" + c.Params[n]
	}
	return strings.Join(names, " ")
}
