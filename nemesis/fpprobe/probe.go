// Package fpprobe tells whether this binary's pingcap/failpoint markers are
// live, that is whether it is a failpoint build: compiled through the
// toolexec internal/fptoolexec (make test-failpoints, make bugzoo, make
// build-failpoints), which rewrites every podsafe package, this one with it.
// It imports nothing of podsafe, so that both the nemesis and the embedded
// cluster's target can ask.
package fpprobe

import (
	"sync"
	"sync/atomic"

	"github.com/pingcap/failpoint"

	"github.com/podsafe/podsafe/internal/fpctx"
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

// probe fires its marker only in a failpoint build. It is a marker like
// every other, with a context and the aiming hook, so a live probe also
// says that the hook lets unaimed failpoints through.
func probe() {
	failpoint.InjectContext(fpctx.For(fpctx.Unnamed), "probe", func() { probed.Store(true) })
}
