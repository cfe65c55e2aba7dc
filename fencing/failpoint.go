package fencing

import "github.com/podsafe/podsafe/internal/fpctx"

// failpoints is the context this package's failpoint markers see: the
// identity of the fencing controller (there is one), so that they can be aimed at it (fpctx).
var failpoints = fpctx.For(fpctx.Controller("fencing"))
