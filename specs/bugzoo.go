package specs

import (
	"fmt"
	"sort"
)

// Bug is one planted bug of the bug zoo: a failpoint in the real code path
// (or, for stale-read, a switch of the store) that breaks named guarantees,
// the checker that must catch it, and a scenario that can expose it.
type Bug struct {
	// Name is what --bug and Scenario.Bugs call it.
	Name string `json:"name"`
	// Description says what the bug does, in one line.
	Description string `json:"description"`
	// Failpoint is the failpoint's full name (package path/name); empty for
	// a bug switched by configuration.
	Failpoint string `json:"failpoint,omitempty"`
	// Guarantees are the IDs of the guarantees the bug breaks.
	Guarantees []string `json:"guarantees"`
	// Checker names the checker that must say Illegal when the bug bites.
	Checker string `json:"checker"`
	// Scenario can expose the bug; the zoo adds the bug to its Bugs. It is
	// also the clean scenario the zoo runs without the bug.
	Scenario Scenario `json:"scenario"`
}

var zoo = map[string]Bug{}

// registerBug adds b to the zoo and to Bugs and BugFailpoints. It panics
// on a duplicate or incomplete entry (a programming error, found by any
// test of this package).
func registerBug(b Bug) {
	if b.Name == "" || b.Description == "" || b.Checker == "" || len(b.Guarantees) == 0 || b.Scenario.Workload == "" {
		panic(fmt.Sprintf("bug zoo: incomplete entry %+v", b))
	}
	if _, dup := zoo[b.Name]; dup {
		panic("bug zoo: duplicate bug " + b.Name)
	}
	zoo[b.Name] = b
	Bugs[b.Name] = b.Description
	if b.Failpoint != "" {
		BugFailpoints[b.Name] = b.Failpoint
	}
}

// Zoo returns the planted bugs, sorted by name.
func Zoo() []Bug {
	out := make([]Bug, 0, len(zoo))
	for _, b := range zoo {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupBug returns the zoo's bug called name.
func LookupBug(name string) (Bug, bool) {
	b, ok := zoo[name]
	return b, ok
}
