package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/st"
)

// failureOutcome is what handleSchedulingFailure did, in comparable form.
type failureOutcome struct {
	// Queue is where the pod's entry is: "backoff", "active", "in flight"
	// or "" when the queue dropped it.
	Queue string
	// Events are "Type Reason: message" of the Events created.
	Events []string
	// Patches are the status patches sent.
	Patches []statusPatch
}

// statusPatch is the part of a status patch the scheduler writes.
type statusPatch struct {
	UID, ResourceVersion string
	Reason, Message      string
	NominatedNodeName    *string
}

// newFailureScheduler builds a scheduler on a fake API holding objs, with
// informer contents pods (the scheduler's view), and pops pod so that a
// cycle is under way.
func newFailureScheduler(t *testing.T, pod *corev1.Pod, informer []*corev1.Pod) (*Scheduler, *fake.Clientset) {
	t.Helper()
	var objs []runtime.Object
	for _, p := range informer {
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	s, err := New(Config{Client: cs, Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	store := s.factory.Core().V1().Pods().Informer().GetStore()
	for _, p := range informer {
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	s.queue.AddOrUpdate(pod)
	if _, err := s.queue.Pop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, cs
}

// outcomeOf reads the queue entry and the fake API's actions.
func outcomeOf(t *testing.T, s *Scheduler, cs *fake.Clientset, pod *corev1.Pod) failureOutcome {
	t.Helper()
	var out failureOutcome
	s.queue.mu.Lock()
	if qp, ok := s.queue.pods[pod.UID]; ok {
		out.Queue = map[place]string{inActive: "active", inBackoff: "backoff", inFlight: "in flight"}[qp.where]
	}
	s.queue.mu.Unlock()
	for _, a := range settledActions(cs) {
		switch {
		case a.GetVerb() == "create" && a.GetResource().Resource == "events":
			ev := a.(k8stesting.CreateAction).GetObject().(*corev1.Event)
			if ev.InvolvedObject.UID != pod.UID {
				t.Errorf("event on %s, want the pod's UID %s", ev.InvolvedObject.UID, pod.UID)
			}
			out.Events = append(out.Events, ev.Type+" "+ev.Reason+": "+ev.Message)
		case a.GetVerb() == "patch" && a.GetSubresource() == "status":
			var p struct {
				Metadata struct {
					UID             string `json:"uid"`
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Status struct {
					Conditions        []corev1.PodCondition `json:"conditions"`
					NominatedNodeName *string               `json:"nominatedNodeName"`
				} `json:"status"`
			}
			if err := json.Unmarshal(a.(k8stesting.PatchAction).GetPatch(), &p); err != nil {
				t.Fatal(err)
			}
			sp := statusPatch{UID: p.Metadata.UID, ResourceVersion: p.Metadata.ResourceVersion, NominatedNodeName: p.Status.NominatedNodeName}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					sp.Reason, sp.Message = c.Reason, c.Message
				}
			}
			out.Patches = append(out.Patches, sp)
		}
	}
	return out
}

func strp(s string) *string { return &s }

// TestHandleSchedulingFailure: the informer decides a failed pod's fate. A
// pod it still shows pending is requeued in back-off, gets one Warning
// Event FailedScheduling and PodScheduled=False (with the nomination, if
// any, in the same patch, conditional on the informer version's UID and
// resourceVersion); a pod it shows gone, bound, being deleted, replaced or
// someone else's is dropped without a write.
func TestHandleSchedulingFailure(t *testing.T) {
	const msg = "binding pod default/p to n1: pods \"p\" not found"
	pod := st.MakePod().Name("p").UID("u1").Obj()
	pending := pod.DeepCopy()
	pending.ResourceVersion = "7"
	withCond := func(p *corev1.Pod, reason, msg string) *corev1.Pod {
		p = p.DeepCopy()
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg}}
		return p
	}
	bound := pending.DeepCopy()
	bound.Spec.NodeName = "n1"
	deleting := st.MakePod().Name("p").UID("u1").Terminating().Obj()
	replaced := st.MakePod().Name("p").UID("u2").Obj()
	other := pending.DeepCopy()
	other.Spec.SchedulerName = "other-scheduler"
	failed := pending.DeepCopy()
	failed.Status.Phase = corev1.PodFailed
	requeued := func(patches ...statusPatch) failureOutcome {
		return failureOutcome{Queue: "backoff", Events: []string{"Warning FailedScheduling: " + msg}, Patches: patches}
	}
	patch := statusPatch{UID: "u1", ResourceVersion: "7", Reason: corev1.PodReasonSchedulerError, Message: msg}
	for _, tc := range []struct {
		name     string
		informer []*corev1.Pod
		nominate *string
		want     failureOutcome
	}{
		{name: "pending: requeued, recorded", informer: []*corev1.Pod{pending}, want: requeued(patch)},
		{
			name:     "pending and nominated: one patch with the nomination",
			informer: []*corev1.Pod{pending},
			nominate: strp("n2"),
			want:     requeued(statusPatch{UID: "u1", ResourceVersion: "7", Reason: corev1.PodReasonSchedulerError, Message: msg, NominatedNodeName: strp("n2")}),
		},
		{
			name:     "the same condition already: the Event, no patch",
			informer: []*corev1.Pod{withCond(pending, corev1.PodReasonSchedulerError, msg)},
			want:     requeued(),
		},
		{
			name:     "another message: patched",
			informer: []*corev1.Pod{withCond(pending, corev1.PodReasonUnschedulable, "0/1 nodes are available")},
			want:     requeued(patch),
		},
		{name: "gone from the informer: dropped", informer: nil},
		{name: "bound: dropped", informer: []*corev1.Pod{bound}},
		{name: "being deleted: dropped", informer: []*corev1.Pod{deleting}},
		{name: "replaced by a pod of the same name: dropped", informer: []*corev1.Pod{replaced}},
		{name: "another scheduler's now: dropped", informer: []*corev1.Pod{other}},
		{name: "finished: dropped", informer: []*corev1.Pod{failed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, cs := newFailureScheduler(t, pod, tc.informer)
			s.handleSchedulingFailure(context.Background(), pod, corev1.PodReasonSchedulerError, msg, tc.nominate)
			if diff := cmp.Diff(tc.want, outcomeOf(t, s, cs, pod)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandleScheduleError: a pod that fits nowhere is Unschedulable with
// kube-scheduler's message, preemption's reason appended when it did not
// help; no nodes at all is Unschedulable too; any other error is the
// scheduler's own, SchedulerError.
func TestHandleScheduleError(t *testing.T) {
	pod := st.MakePod().Name("p").UID("u1").Req("1", "").Obj()
	pending := pod.DeepCopy()
	pending.ResourceVersion = "7"
	insufficient := framework.NewStatus(framework.Unschedulable, noderesources.ReasonCPU)
	tainted := framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {k: v}")
	for _, tc := range []struct {
		name       string
		err        error
		wantReason string
		wantMsg    string
	}{
		{
			name:       "fits nowhere, preemption finds no victims",
			err:        &FitError{Pod: pod, NumNodes: 3, Statuses: framework.NodeToStatus{"n1": insufficient, "n2": insufficient, "n3": tainted}},
			wantReason: corev1.PodReasonUnschedulable,
			wantMsg: "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 Insufficient cpu. " +
				"preemption: no node where removing lower-priority pods makes the pod fit.",
		},
		{
			name:       "rejected by a PreFilter",
			err:        &FitError{Pod: pod, NumNodes: 2, PreFilterMsg: "parsing pod: bad term", Statuses: framework.NodeToStatus{"n1": tainted, "n2": tainted}},
			wantReason: corev1.PodReasonUnschedulable,
			wantMsg:    "0/2 nodes are available: parsing pod: bad term. preemption: no node where removing lower-priority pods makes the pod fit.",
		},
		{
			name:       "no nodes",
			err:        ErrNoNodesAvailable,
			wantReason: corev1.PodReasonUnschedulable,
			wantMsg:    ErrNoNodesAvailable.Error(),
		},
		{
			name:       "an internal error",
			err:        fmt.Errorf("filtering node n1 for pod default/p: %w", errors.New("boom")),
			wantReason: corev1.PodReasonSchedulerError,
			wantMsg:    "filtering node n1 for pod default/p: boom",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, cs := newFailureScheduler(t, pod, []*corev1.Pod{pending})
			s.handleScheduleError(context.Background(), framework.NewCycleState(), pod, tc.err)
			want := failureOutcome{Queue: "backoff", Events: []string{"Warning FailedScheduling: " + tc.wantMsg},
				Patches: []statusPatch{{UID: "u1", ResourceVersion: "7", Reason: tc.wantReason, Message: tc.wantMsg}}}
			if diff := cmp.Diff(want, outcomeOf(t, s, cs, pod)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// TestClearLowerNominationsKeepsHigher: a pod taking a node voids only the
// nominations of strictly lower-priority pods there, never its own nor
// those of pods of equal or higher priority.
func TestClearLowerNominationsKeepsHigher(t *testing.T) {
	pod := st.MakePod().Name("p").UID("u1").Priority(10).Obj()
	s, _ := newFailureScheduler(t, pod, nil)
	lower := st.MakePod().Name("lower").UID("lower").Priority(9).Obj()
	equal := st.MakePod().Name("equal").UID("equal").Priority(10).Obj()
	higher := st.MakePod().Name("higher").UID("higher").Priority(11).Obj()
	for _, p := range []*corev1.Pod{pod, lower, equal, higher} {
		s.nominator.Set(p, "n1")
	}
	s.clearLowerNominations(context.Background(), pod, "n1")
	got := map[string]string{}
	for _, p := range []*corev1.Pod{pod, lower, equal, higher} {
		got[p.Name] = s.nominator.NodeOf(p.UID)
	}
	want := map[string]string{"p": "n1", "lower": "", "equal": "n1", "higher": "n1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nominations (-want +got):\n%s", diff)
	}
}
