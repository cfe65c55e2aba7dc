// Package fpprobe tells whether this binary's pingcap/failpoint markers are
// live, that is whether its sources were rewritten by failpoint-ctl (make
// failpoint-enable rewrites the nemesis directory, this package with it).
// It imports nothing of podsafe, so that both the nemesis and the embedded
// cluster's target can ask.
package fpprobe

import (
	"sync"
	"sync/atomic"

	"github.com/pingcap/failpoint"
)

// Name is the probe's failpoint.
const Name = "github.com/podsafe/podsafe/nemesis/fpprobe/probe"

var (
	once   sync.Once
	probed atomic.Bool
	live   bool
)

// Live reports whether the failpoint markers of this binary are live. When
// they are not, enabling a failpoint succeeds but nothing ever fires.
func Live() bool {
	once.Do(func() {
		if err := failpoint.Enable(Name, "return(true)"); err != nil {
			return
		}
		probe()
		_ = failpoint.Disable(Name)
		live = probed.Load()
	})
	return live
}

// probe fires its marker only in a rewritten build.
func probe() {
	failpoint.Inject("probe", func() { probed.Store(true) })
}
