// Package grace compares podsafe's grace-period arithmetic with upstream
// Kubernetes v1.37.2 on generated deletions (a differential test): the same
// pod and the same DELETE requests go to both, and every disagreement is
// shrunk to a small case and printed as a table-test row of apiserver's own
// tests.
//
// What upstream exports, and so what is compared:
//
//   - the API server's first graceful delete (GP-6): podStrategy
//     CheckGracefulDelete of k8s.io/kubernetes/pkg/registry/core/pod
//     (Strategy), on the pod as upstream defaulting
//     (pkg/apis/core/v1.SetObjectDefaults_Pod) stored it, against
//     apiserver.EffectiveGracePeriod (UpstreamFirstGrace,
//     PodsafeFirstGrace; TestFirstGrace);
//   - every DELETE's decision, a pod already terminating included (GP-6,
//     PS-3): k8s.io/apiserver/pkg/registry/rest BeforeDelete with that
//     Strategy and the generic registry's Store.Delete around it (delete at
//     once, mark terminating or terminating sooner, or leave a pending
//     deletion alone), against the pure apiserver.GracefulDelete on the
//     same pod, request and instant: outcome, deletionGracePeriodSeconds,
//     deletionTimestamp and metadata.generation (UpstreamDecide,
//     PodsafeSteps, DecisionDiff; TestGracefulDelete). Cases are fresh pods
//     with a first and maybe a second DELETE (Generate), and pods already
//     terminating in any stored state, deletionGracePeriodSeconds nil, 0 or
//     negative included (GenerateTerminating);
//   - the whole deletion through podsafe's real API server over a real
//     1-member raftstore on a fake clock, against upstream's rules applied
//     in sequence to upstream's own stored pod (Upstream, Podsafe;
//     TestDeletion): removed, or terminating with which
//     deletionGracePeriodSeconds and deadline, and whether the DELETE wrote
//     nothing (pending). metadata.generation is not compared there: podsafe's
//     raftstore sets the stored generation itself (from spec changes), so
//     upstream's bump on the first graceful deletion, which GracefulDelete
//     makes, does not reach the store.
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
// unexported variable), so the upstream side places each case's timeline on
// the real time of the call and compares deadlines allowing callAllowance
// for the call itself; podsafe's side runs on a fake clock from a whole
// second. The case's instants keep off each other's grid (DELETEs on whole
// and half seconds, seeded deadlines at three quarters), so the allowance
// never moves an answer.
package grace
