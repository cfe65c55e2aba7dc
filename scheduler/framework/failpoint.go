package framework

import "github.com/podsafe/podsafe/internal/fpctx"

// failpoints is the context this package's failpoint markers see: the
// identity of the scheduler (there is one), so that they can be aimed at it (fpctx).
var failpoints = fpctx.For(fpctx.Scheduler)
