package kubelet

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// TestLeaseRenewalWritesOnce: after the first renewal, each renewal is one
// update of the Lease the kubelet wrote last, with no read; a conflict (some
// other writer) or a Lease that vanished sends it back to read (or create)
// and write, and the next renewal is one write again; a renewal that timed
// out keeps the copy, so the next one is still a single write.
func TestLeaseRenewalWritesOnce(t *testing.T) {
	client := fake.NewClientset()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	k := &Kubelet{cfg: Config{Client: client, NodeName: "n1", LeaseDuration: 40 * time.Second, RequestTimeout: time.Minute},
		clock: clk, log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	renew := func(want string) {
		t.Helper()
		client.ClearActions()
		clk.Step(10 * time.Second)
		if err := k.renewLease(ctx); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range client.Actions() {
			got = append(got, a.GetVerb())
		}
		if strings.Join(got, " ") != want {
			t.Errorf("renewal made %q, want %q", got, want)
		}
		l, err := client.CoordinationV1().Leases(coordinationv1NodeLeaseNamespace).Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !l.Spec.RenewTime.Time.Equal(clk.Now()) || *l.Spec.HolderIdentity != "n1" || l.Spec.AcquireTime == nil {
			t.Errorf("lease after renewal: %+v, want renewed at %s by n1 with an acquire time", l.Spec, clk.Now())
		}
	}
	renew("get create")
	renew("update")
	renew("update")

	conflicts := 1
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "n1", nil)
	})
	renew("update get update")
	renew("update")

	if err := client.CoordinationV1().Leases(coordinationv1NodeLeaseNamespace).Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	renew("update get create")
	renew("update")

	// A renewal that timed out keeps the copy: the next renewal is one
	// update again, with no read (the timed-out write did not land here;
	// had it landed, the update would conflict and read, as above).
	timeouts := 1
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if timeouts == 0 {
			return false, nil, nil
		}
		timeouts--
		return true, nil, apierrors.NewTimeoutError("the outcome of the request is unknown", 1)
	})
	client.ClearActions()
	clk.Step(10 * time.Second)
	if err := k.renewLease(ctx); err == nil || !apierrors.IsTimeout(err) {
		t.Fatalf("renewal during a timeout: %v, want the timeout", err)
	}
	if k.lastLease == nil {
		t.Fatal("a timed-out renewal dropped the kubelet's copy of its Lease")
	}
	renew("update")
}
