package kubelet

import (
	"context"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// failpoints is the context the kubelet's failpoint markers see: its
// identity, fpctx.Kubelet(NodeName), so that a failpoint aimed at one
// node's kubelet fires there only.
func (k *Kubelet) failpoints() context.Context { return fpctx.For(fpctx.Kubelet(k.cfg.NodeName)) }
