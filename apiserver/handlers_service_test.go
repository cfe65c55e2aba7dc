package apiserver

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// A Service gets a cluster IP of its own when it is created, from the
// service range; a headless one gets none; deleting it frees the address,
// and a create that fails takes none.
func TestServiceClusterIPs(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin).CoreV1().Services("default")
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	taken := func() int {
		objs, _, err := e.store.List(ctx, storeIPAddresses, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	cidr := serviceCIDR
	seen := map[string]bool{}
	for _, name := range []string{"a", "b", "c"} {
		got, err := c.Create(ctx, svc(name, ""), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := netip.ParseAddr(got.Spec.ClusterIP)
		if err != nil || !cidr.Contains(ip) || seen[got.Spec.ClusterIP] || len(got.Spec.ClusterIPs) != 1 || got.Spec.ClusterIPs[0] != got.Spec.ClusterIP {
			t.Errorf("service %s: clusterIP %q (%v), clusterIPs %v, seen %v", name, got.Spec.ClusterIP, err, got.Spec.ClusterIPs, seen)
		}
		seen[got.Spec.ClusterIP] = true
	}
	if n := taken(); n != 3 {
		t.Errorf("%d addresses taken, want 3", n)
	}
	headless, err := c.Create(ctx, svc("headless", corev1.ClusterIPNone), metav1.CreateOptions{})
	if err != nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || taken() != 3 {
		t.Errorf("headless: %q, %v, %d taken", headless.Spec.ClusterIP, err, taken())
	}
	// A create that fails (the name exists) keeps no address.
	if _, err := c.Create(ctx, svc("a", ""), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second a: %v", err)
	}
	if n := taken(); n != 3 {
		t.Errorf("a failed create left %d addresses taken, want 3", n)
	}
	// An address asked for is given when free, refused when taken.
	var one string
	for ip := range seen {
		one = ip
		break
	}
	if _, err := c.Create(ctx, svc("dup", one), metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a taken address: %v, want 422", err)
	}
	if err := c.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := taken(); n != 2 {
		t.Errorf("after deleting a: %d addresses taken, want 2", n)
	}
	gen, err := c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil || gen.Spec.ClusterIP == "" {
		t.Fatalf("generated name: %v, %+v", err, gen)
	}
	rec, err := e.store.Get(ctx, raftstore.Key{Resource: storeIPAddresses, Name: gen.Spec.ClusterIP})
	if err != nil || !strings.Contains(string(rec.Data), `"name":"`+gen.Name+`"`) {
		t.Errorf("the address of %s does not name it: %v %s", gen.Name, err, rec.Data)
	}
}
