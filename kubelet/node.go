package kubelet

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runNode registers the Node and re-posts its conditions every
// NodeStatusEvery, and at once when memory pressure changes, retrying while
// the API cannot be reached.
func (k *Kubelet) runNode(ctx context.Context) {
	pressureChanged := k.mem.changes()
	retry := time.Second
	for {
		wait := k.cfg.NodeStatusEvery
		if err := k.syncNode(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			k.log.Debug("node status not posted", "err", err)
			wait = retry
			retry = min(retry*2, k.cfg.LeaseRenew)
		} else {
			retry = time.Second
			k.registeredOnce.Do(func() { close(k.registered) })
		}
		t := k.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-pressureChanged:
			t.Stop()
		case <-k.statusKick:
			t.Stop()
		case <-t.C():
		}
	}
}

// syncNode creates the Node if it does not exist, keeps its labels and
// taints, and posts the MemoryPressure and Ready conditions with a fresh
// heart-beat.
func (k *Kubelet) syncNode(ctx context.Context) error {
	nodes := k.cfg.Client.CoreV1().Nodes()
	rctx, cancel := k.requestCtx(ctx)
	defer cancel()
	node, err := nodes.Get(rctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var annotations map[string]string
		if k.cfg.CSIAttachments {
			annotations = map[string]string{ControllerManagedAttachAnnotation: "true"}
		}
		node, err = nodes.Create(rctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: k.cfg.Labels, Annotations: annotations},
			Spec:       corev1.NodeSpec{Taints: k.cfg.Taints},
		}, metav1.CreateOptions{})
		if err == nil {
			k.log.Info("node registered")
		}
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", k.cfg.NodeName, err)
	}
	now := metav1.NewTime(k.clock.Now())
	ready := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now,
	}
	pressure, since, stale := k.mem.toPost()
	var oldPressure *corev1.NodeCondition
	var conds []corev1.NodeCondition
	for _, c := range node.Status.Conditions {
		switch c.Type {
		case corev1.NodeReady:
			if c.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
		case corev1.NodeMemoryPressure:
			oldPressure = &c
		default:
			conds = append(conds, c)
		}
	}
	node.Status.Conditions = append(conds, memoryPressureCondition(oldPressure, pressure, since, now.Time), ready)
	node.Status.Capacity = maps.Clone(k.cfg.Capacity)
	node.Status.Allocatable = maps.Clone(k.cfg.Capacity)
	node.Status.Phase = corev1.NodeRunning
	node.Status.NodeInfo.KubeletVersion = k.cfg.Version
	node.Status.NodeInfo.OperatingSystem = "linux"
	node.Status.NodeInfo.Architecture = runtime.GOARCH
	node.Status.NodeInfo.ContainerRuntimeVersion = "podsafe-sim://1"
	var inUse []corev1.UniqueVolumeName
	if k.cfg.CSIAttachments {
		k.mu.Lock()
		inUse = k.volumesInUse()
		k.mu.Unlock()
		node.Status.VolumesInUse = inUse
	}
	if _, err := nodes.UpdateStatus(rctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("posting status of node %s: %w", k.cfg.NodeName, err)
	}
	k.mem.posted(pressure, stale)
	if k.cfg.CSIAttachments {
		reported := make(map[string]bool, len(inUse))
		fresh := false
		for _, n := range inUse {
			reported[string(n)] = true
		}
		k.mu.Lock()
		for n := range reported {
			fresh = fresh || !k.reportedInUse[n]
		}
		k.reportedInUse = reported
		k.mu.Unlock()
		if fresh {
			// The workers waiting for their volumes to be reported in
			// use look again now.
			k.wakeAll()
		}
	}
	return nil
}
