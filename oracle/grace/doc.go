// Package grace compares podsafe's grace-period arithmetic with upstream
// Kubernetes v1.37.2 on generated deletions (a differential test): the same
// pod and the same DELETE requests go to both, and every disagreement is
// shrunk to a small case and printed as a table-test literal.
//
// What upstream exports, and so what is compared:
//
//   - the API server's first graceful delete (GP-6): podStrategy
//     CheckGracefulDelete of k8s.io/kubernetes/pkg/registry/core/pod
//     (Strategy), on the pod as upstream defaulting
//     (pkg/apis/core/v1.SetObjectDefaults_Pod) stored it, against
//     apiserver.EffectiveGracePeriod (UpstreamFirstGrace,
//     PodsafeFirstGrace);
//   - the whole deletion, a second DELETE included (GP-6, PS-3: a second
//     DELETE may only shorten): k8s.io/apiserver/pkg/registry/rest
//     BeforeDelete with that Strategy and the generic registry's decision
//     around it (delete at once, mark terminating, or leave a pending
//     deletion alone), against podsafe's real API server over a real
//     1-member raftstore on a fake clock (Upstream, Podsafe). podsafe's rule
//     for a DELETE of a pod already terminating lives inside the unexported
//     Server.deletePod, so it is compared through HTTP.
//
// What upstream does not export, and so is not compared here:
//
//   - the kubelet's pod-level grace (GP-4, GP-5): calculateEffectiveGracePeriod
//     in pkg/kubelet/pod_workers.go is unexported, as is the podWorkers type
//     that calls it, so kubelet.EffectiveGracePeriod has no importable
//     counterpart;
//   - the kubelet's container grace (GP-1, GP-2, GP-3): setTerminationGracePeriod,
//     executePreStopHook and killContainer in
//     pkg/kubelet/kuberuntime/kuberuntime_container.go are unexported, and so
//     is minimumGracePeriodInSeconds (kuberuntime_manager.go), so
//     kubelet.ContainerGracePeriod and kubelet.RuntimeGracePeriod have none
//     either;
//   - eviction's grace override (GP-7): the soft/hard choice sits inside the
//     unexported managerImpl.synchronize of pkg/kubelet/eviction, and
//     killPodNow in pkg/kubelet is unexported; the exported eviction helpers
//     parse thresholds only.
//
// Upstream's BeforeDelete reads the real clock (its metav1Now is an
// unexported variable), so the upstream side anchors each case at the real
// time of the call and compares deadlines in whole seconds with a 250 ms
// allowance for the call itself; podsafe's side runs on a fake clock.
package grace
