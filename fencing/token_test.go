package fencing

import (
	"context"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestNextTokenCreatesAndIncrements(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	now := metav1.NewMicroTime(t0)
	for want := int64(1); want <= 3; want++ {
		got, err := nextToken(ctx, cs, now)
		if err != nil || got != want {
			t.Fatalf("nextToken = %d, %v; want %d", got, err, want)
		}
	}
	l, err := cs.CoordinationV1().Leases(TokenLeaseNamespace).Get(ctx, TokenLeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 3 {
		t.Errorf("lease counter = %v, want 3", l.Spec.LeaseTransitions)
	}
}

// TestNextTokenRetriesConflicts: an increment that loses the
// compare-and-swap reads again and never hands out a token twice.
func TestNextTokenRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: TokenLeaseNamespace, Name: TokenLeaseName},
		Spec:       coordinationv1.LeaseSpec{LeaseTransitions: ptrTo[int32](41)},
	})
	var mu sync.Mutex
	conflicts := 2
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		// Another controller won the race: it bumped the counter.
		l, err := cs.Tracker().Get(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			TokenLeaseNamespace, TokenLeaseName)
		if err != nil {
			return true, nil, err
		}
		lease := l.(*coordinationv1.Lease).DeepCopy()
		*lease.Spec.LeaseTransitions++
		if err := cs.Tracker().Update(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
			lease, TokenLeaseNamespace); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, TokenLeaseName, nil)
	})
	got, err := nextToken(ctx, cs, metav1.NewMicroTime(t0))
	if err != nil || got != 44 {
		t.Fatalf("nextToken = %d, %v; want 44 (41, then two rivals' 42 and 43)", got, err)
	}
}

func TestNextTokenHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := nextToken(ctx, fake.NewClientset(), metav1.NewMicroTime(t0)); err == nil {
		t.Fatal("nextToken with a cancelled context succeeded")
	}
}

// TestNextTokenLosesCreateRace: when another controller creates the token
// lease first, the token is the increment of theirs, not an error.
func TestNextTokenLosesCreateRace(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	cs.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		rival := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: TokenLeaseNamespace, Name: TokenLeaseName},
			Spec:       coordinationv1.LeaseSpec{LeaseTransitions: ptrTo[int32](1)},
		}
		if err := cs.Tracker().Create(gvr, rival, TokenLeaseNamespace); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewAlreadyExists(gvr.GroupResource(), TokenLeaseName)
	})
	got, err := nextToken(ctx, cs, metav1.NewMicroTime(t0))
	if err != nil || got != 2 {
		t.Fatalf("nextToken = %d, %v; want 2 (the rival's 1, incremented)", got, err)
	}
}
