package cluster

import (
	"errors"
	"fmt"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/kubelet"
)

// containerLogs serves the API servers' pods/log from the nodes' simulated
// runtimes. As a kubelet serves its node's logs, a node answers only while
// its kubelet runs and its power is on.
type containerLogs struct{ c *Cluster }

var _ apiserver.ContainerLogs = containerLogs{}

// ContainerLog implements apiserver.ContainerLogs.
func (l containerLogs) ContainerLog(node, uid, container string, previous bool) ([]apiserver.LogLine, <-chan struct{}, bool, error) {
	if !l.c.KubeletRunning(node) {
		return nil, nil, false, fmt.Errorf("the kubelet of node %s is not running: %w", node, apiserver.ErrLogUnavailable)
	}
	ks := l.c.kubeletSet()
	ks.mu.Lock()
	rt := ks.runtimes[node]
	ks.mu.Unlock()
	switch {
	case rt == nil:
		return nil, nil, false, fmt.Errorf("node %s runs no containers: %w", node, apiserver.ErrNoContainerLog)
	case rt.PoweredOff():
		return nil, nil, false, fmt.Errorf("node %s is powered off: %w", node, apiserver.ErrLogUnavailable)
	}
	lines, more, ended, err := rt.ContainerLog(uid, container, previous)
	if errors.Is(err, kubelet.ErrNoLog) {
		return nil, nil, false, fmt.Errorf("%w: %w", apiserver.ErrNoContainerLog, err)
	}
	if err != nil {
		return nil, nil, false, err
	}
	out := make([]apiserver.LogLine, len(lines))
	for i, ln := range lines {
		out[i] = apiserver.LogLine{Time: ln.Time, Text: ln.Text}
	}
	return out, more, ended, nil
}
