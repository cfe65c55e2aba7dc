package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/raftstore"
)

func ipService(name, ip string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}}}
	applyDefaults(svc)
	return svc
}

// TestAllocateServiceIPConcurrent: 40 concurrent allocations, half through
// a second server over the same store, never share an address; each lands
// in the dynamic part of 10.96.0.0/12 and is recorded in the store.
func TestAllocateServiceIPConcurrent(t *testing.T) {
	e := newTestEnv(t)
	other := newTestEnvOn(t, e.store)
	ctx := testCtx(t)
	r := newIPRange(serviceCIDR)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[string]string{}
	)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv := e.srv
			if i%2 == 1 {
				srv = other.srv
			}
			svc := ipService(fmt.Sprintf("s%d", i), "")
			if _, err := srv.allocateServiceIP(ctx, svc); err != nil {
				t.Errorf("allocate s%d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if prev, dup := got[svc.Spec.ClusterIP]; dup {
				t.Errorf("%s allocated to %s and %s", svc.Spec.ClusterIP, prev, svc.Name)
			}
			got[svc.Spec.ClusterIP] = svc.Name
			if len(svc.Spec.ClusterIPs) != 1 || svc.Spec.ClusterIPs[0] != svc.Spec.ClusterIP {
				t.Errorf("%s: clusterIPs %v, clusterIP %s", svc.Name, svc.Spec.ClusterIPs, svc.Spec.ClusterIP)
			}
		}()
	}
	wg.Wait()
	for ip := range got {
		off, ok := r.offset(netip.MustParseAddr(ip))
		if !ok || off <= r.staticBand {
			t.Errorf("%s: offset %d, want in the dynamic part above %d", ip, off, r.staticBand)
		}
		if _, err := e.store.Get(ctx, raftstore.Key{Resource: storeIPAddresses, Name: ip}); err != nil {
			t.Errorf("%s has no record: %v", ip, err)
		}
	}
}

// TestAllocateServiceIPChosen: a chosen address is taken once; a second
// service asking for it, or for one outside the range, gets
// kube-apiserver's 422; a release frees it; headless and ExternalName
// services take nothing.
func TestAllocateServiceIPChosen(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	release, err := e.srv.allocateServiceIP(ctx, ipService("a", "10.96.0.10"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ip, msg string }{
		{"10.96.0.10", "failed to allocate IP 10.96.0.10: provided IP is already allocated"},
		{"10.112.0.1", "failed to allocate IP 10.112.0.1: the provided IP (10.112.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12"},
		{"10.96.0.0", "not in the valid range"},
		{"10.111.255.255", "not in the valid range"},
	} {
		_, err := e.srv.allocateServiceIP(ctx, ipService("b", tc.ip))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want 422 saying %q", tc.ip, err, tc.msg)
		}
		if c := causes(err); len(c) != 1 || c[0].Field != "spec.clusterIPs[0]" {
			t.Errorf("%s: causes %+v, want one on spec.clusterIPs[0]", tc.ip, c)
		}
	}
	release(ctx)
	if _, err := e.srv.allocateServiceIP(ctx, ipService("b", "10.96.0.10")); err != nil {
		t.Errorf("after release: %v", err)
	}
	for _, svc := range []*corev1.Service{ipService("h", corev1.ClusterIPNone),
		{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "x.example"}}} {
		before := svc.Spec.ClusterIP
		if _, err := e.srv.allocateServiceIP(ctx, svc); err != nil || svc.Spec.ClusterIP != before {
			t.Errorf("%s: clusterIP %q, %v; want %q kept", svc.Name, svc.Spec.ClusterIP, err, before)
		}
	}
	objs, _, err := e.store.List(ctx, storeIPAddresses, "")
	if err != nil || len(objs) != 1 {
		t.Errorf("records %d (%v), want 1", len(objs), err)
	}
}

// TestAllocateServiceIPFull: a small range is filled completely (the
// random draws then the listing find every free address), and the next
// allocation fails instead of reusing one; releasing one address makes it
// the next allocation.
func TestAllocateServiceIPFull(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	r := newIPRange(netip.MustParsePrefix("10.0.0.0/28"))
	seen := map[string]bool{}
	for i := range 14 {
		svc := ipService(fmt.Sprintf("s%d", i), "")
		if _, err := e.srv.allocateServiceIPIn(ctx, r, svc); err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[svc.Spec.ClusterIP] {
			t.Fatalf("%s allocated twice", svc.Spec.ClusterIP)
		}
		seen[svc.Spec.ClusterIP] = true
	}
	if _, err := e.srv.allocateServiceIPIn(ctx, r, ipService("full", "")); err == nil || !strings.Contains(err.Error(), "is full") {
		t.Errorf("allocation in a full range: %v", err)
	}
	e.srv.releaseServiceIPs(ctx, &corev1.Service{Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.7"}}})
	svc := ipService("again", "")
	if _, err := e.srv.allocateServiceIPIn(ctx, r, svc); err != nil || svc.Spec.ClusterIP != "10.0.0.7" {
		t.Errorf("after releasing 10.0.0.7: got %q, %v", svc.Spec.ClusterIP, err)
	}
}

// causes returns the causes of an API status error.
func causes(err error) []metav1.StatusCause {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return nil
	}
	return se.Status().Details.Causes
}
