package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// budget is a PodDisruptionBudget on app=web with minAvailable or
// maxUnavailable ("" leaves one unset; "50%" is a percentage).
func budget(minAvailable, maxUnavailable string) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Generation: 3},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if minAvailable != "" {
		pdb.Spec.MinAvailable = ptr.To(intstr.Parse(minAvailable))
	}
	if maxUnavailable != "" {
		pdb.Spec.MaxUnavailable = ptr.To(intstr.Parse(maxUnavailable))
	}
	return pdb
}

// webPods returns ready pods web-0 … web-(n-1) labelled app=web.
func webPods(n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		p := makePod("web-" + string(rune('0'+i))).node("n").ready().obj()
		p.Labels = map[string]string{"app": "web"}
		out = append(out, p)
	}
	return out
}

// counts is the part of a budget status the table compares.
type counts struct {
	Current, Desired, Expected, Allowed int32
	Generation                          int64
	Disrupted                           []string
	Condition                           string // status/reason
}

func countsOf(st policyv1.PodDisruptionBudgetStatus) counts {
	c := counts{Current: st.CurrentHealthy, Desired: st.DesiredHealthy, Expected: st.ExpectedPods,
		Allowed: st.DisruptionsAllowed, Generation: st.ObservedGeneration}
	for name := range st.DisruptedPods {
		c.Disrupted = append(c.Disrupted, name)
	}
	if cond := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); cond != nil {
		c.Condition = string(cond.Status) + "/" + cond.Reason
	}
	return c
}

func TestBudgetStatus(t *testing.T) {
	now := time.Unix(10_000, 0)
	scaleOf := func(n int32) func([]*corev1.Pod) (int32, error) {
		return func([]*corev1.Pod) (int32, error) { return n, nil }
	}
	unknown := func([]*corev1.Pod) (int32, error) { return 0, ErrUnknownScale }
	with := func(pods []*corev1.Pod, i int, change func(*corev1.Pod)) []*corev1.Pod {
		change(pods[i])
		return pods
	}
	disrupted := func(pdb *policyv1.PodDisruptionBudget, name string, ago time.Duration) *policyv1.PodDisruptionBudget {
		pdb.Status.DisruptedPods = map[string]metav1.Time{name: metav1.NewTime(now.Add(-ago))}
		return pdb
	}
	for _, tc := range []struct {
		name        string
		pdb         *policyv1.PodDisruptionBudget
		pods        []*corev1.Pod
		scale       func([]*corev1.Pod) (int32, error)
		want        counts
		wantRecheck time.Time
	}{
		{
			name: "integer minAvailable: expected pods are the selected ones",
			pdb:  budget("2", ""), pods: webPods(3), scale: unknown,
			want: counts{Current: 3, Desired: 2, Expected: 3, Allowed: 1, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "minAvailable met exactly allows nothing",
			pdb:  budget("3", ""), pods: webPods(3), scale: unknown,
			want: counts{Current: 3, Desired: 3, Expected: 3, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
		{
			name: "a pod that is not Ready is not healthy",
			pdb:  budget("2", ""), scale: unknown,
			pods: with(webPods(3), 0, func(p *corev1.Pod) { p.Status.Conditions = nil }),
			want: counts{Current: 2, Desired: 2, Expected: 3, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
		{
			name: "a terminating pod is not healthy",
			pdb:  budget("1", ""), scale: unknown,
			pods: with(webPods(2), 1, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }),
			want: counts{Current: 1, Desired: 1, Expected: 2, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
		{
			name: "finished pods are not expected",
			pdb:  budget("1", ""), scale: unknown,
			pods: with(webPods(3), 2, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded; p.Status.Conditions = nil }),
			want: counts{Current: 2, Desired: 1, Expected: 2, Allowed: 1, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "percentage minAvailable applies to the controllers' scale, rounded up",
			pdb:  budget("50%", ""), pods: webPods(3), scale: scaleOf(5),
			want: counts{Current: 3, Desired: 3, Expected: 5, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
		{
			name: "integer maxUnavailable",
			pdb:  budget("", "1"), pods: webPods(4), scale: scaleOf(4),
			want: counts{Current: 4, Desired: 3, Expected: 4, Allowed: 1, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "percentage maxUnavailable rounds the unavailable pods up",
			pdb:  budget("", "30%"), pods: webPods(4), scale: scaleOf(4),
			want: counts{Current: 4, Desired: 2, Expected: 4, Allowed: 2, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "maxUnavailable above the scale desires no pod",
			pdb:  budget("", "5"), pods: webPods(2), scale: scaleOf(2),
			want: counts{Current: 2, Desired: 0, Expected: 2, Allowed: 2, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "neither field: nothing desired",
			pdb:  budget("", ""), pods: webPods(2), scale: unknown,
			want: counts{Current: 2, Desired: 0, Expected: 2, Allowed: 2, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "an unknown scale allows no disruption",
			pdb:  budget("", "1"), pods: webPods(3), scale: unknown,
			want: counts{Current: 3, Allowed: 0, Generation: 3, Condition: "False/SyncFailed"},
		},
		{
			name: "a pod the eviction API just disrupted is not healthy",
			pdb:  disrupted(budget("1", ""), "web-0", 10*time.Second), pods: webPods(2), scale: unknown,
			want:        counts{Current: 1, Desired: 1, Expected: 2, Allowed: 0, Generation: 3, Disrupted: []string{"web-0"}, Condition: "False/InsufficientPods"},
			wantRecheck: now.Add(DisruptedPodTimeout - 10*time.Second),
		},
		{
			name: "a disruption whose deletion never came expires",
			pdb:  disrupted(budget("1", ""), "web-0", DisruptedPodTimeout), pods: webPods(2), scale: unknown,
			want: counts{Current: 2, Desired: 1, Expected: 2, Allowed: 1, Generation: 3, Condition: "True/SufficientPods"},
		},
		{
			name: "a disrupted pod that began terminating leaves the list",
			pdb:  disrupted(budget("1", ""), "web-0", time.Second), scale: unknown,
			pods: with(webPods(2), 0, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }),
			want: counts{Current: 1, Desired: 1, Expected: 2, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
		{
			name: "no pods: nothing healthy, nothing allowed",
			pdb:  budget("1", ""), scale: unknown,
			want: counts{Current: 0, Desired: 1, Expected: 0, Allowed: 0, Generation: 3, Condition: "False/InsufficientPods"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, recheck := BudgetStatus(tc.pdb, tc.pods, tc.scale, now)
			if diff := cmp.Diff(tc.want, countsOf(got)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !recheck.Equal(tc.wantRecheck) {
				t.Errorf("recheck at %v, want %v", recheck, tc.wantRecheck)
			}
		})
	}
}

// TestBudgetConditionTransition: the condition's transition time moves only
// when its status changes.
func TestBudgetConditionTransition(t *testing.T) {
	t0 := time.Unix(1000, 0)
	pdb := budget("1", "")
	st, _ := BudgetStatus(pdb, webPods(2), nil, t0)
	pdb.Status = st
	st, _ = BudgetStatus(pdb, webPods(3), nil, t0.Add(time.Minute))
	if c := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); c == nil || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition %+v, want its transition still at %v", c, t0)
	}
	pdb.Status = st
	st, _ = BudgetStatus(pdb, webPods(1), nil, t0.Add(2*time.Minute))
	if c := apimeta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition); c == nil || !c.LastTransitionTime.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("condition %+v, want a transition at %v", c, t0.Add(2*time.Minute))
	}
}

// TestDisruptionSync runs sync against a fake API: the scale comes from the
// pods' ReplicaSet and StatefulSet, each counted once, and a bare pod
// expects itself; the status is written through the status subresource.
func TestDisruptionSync(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-rs", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3)}}
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-ss", UID: "ss-uid"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}
	owned := func(name string, owner metav1.Object, kind string) *corev1.Pod {
		p := makePod(name).node("n").ready().obj()
		p.Labels = map[string]string{"app": "web"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(),
			UID: owner.GetUID(), Controller: ptr.To(true)}}
		return p
	}
	bare := webPods(1)[0]
	objs := []*corev1.Pod{owned("a", rs, "ReplicaSet"), owned("b", rs, "ReplicaSet"), owned("c", ss, "StatefulSet"), bare}
	pdb := budget("", "50%")
	cs := fake.NewClientset(rs, ss, pdb, objs[0], objs[1], objs[2], objs[3])
	clk := clocktesting.NewFakeClock(time.Unix(5000, 0))
	dc, err := NewDisruption(DisruptionConfig{Client: cs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	dc.factory.Start(ctx.Done())
	defer func() {
		cancel()
		dc.factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), dc.synced...) {
		t.Fatal("caches did not sync")
	}
	if err := dc.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	got, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Scale 3 + 2 + 1 = 6; 50% unavailable leaves 3 desired; 4 are healthy.
	want := counts{Current: 4, Desired: 3, Expected: 6, Allowed: 1, Generation: 3, Condition: "True/SufficientPods"}
	if diff := cmp.Diff(want, countsOf(got.Status)); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	var statusWrites int
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" && a.GetResource().Resource == "poddisruptionbudgets" {
			if a.GetSubresource() != "status" {
				t.Errorf("budget written without the status subresource: %v", a)
			}
			statusWrites++
		}
	}
	if statusWrites != 1 {
		t.Errorf("%d status writes, want 1", statusWrites)
	}

	// A pod of a controller the informer does not know fails safe.
	ghost := owned("d", &metav1.ObjectMeta{Name: "gone", UID: types.UID("gone-uid")}, "ReplicaSet")
	if _, err := dc.expectedScale([]*corev1.Pod{ghost}); !errors.Is(err, ErrUnknownScale) {
		t.Errorf("scale with an unknown controller: err %v, want ErrUnknownScale", err)
	}
}
