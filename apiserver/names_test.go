package apiserver

import (
	"context"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// TestGenerateName checks that generateName is judged by the names made from
// it: "pod." (the Event naming style) is fine, since "pod.x7k2q" is a valid
// DNS subdomain, while prefixes whose every generated name is invalid are
// refused; long prefixes are cut so the name stays within 63 characters.
func TestGenerateName(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	long := strings.Repeat("a", 70)
	cases := []struct {
		name   string
		create func(context.Context, kubernetes.Interface, string) (runtime.Object, error)
		prefix string
		want   string // the name's pattern; "" when the create is refused (422)
	}{
		{"event with a trailing dot", createEvent, "mypod.", `^mypod\.[a-z0-9]{5}$`},
		{"event with a dotted prefix", createEvent, "web-0.demo.", `^web-0\.demo\.[a-z0-9]{5}$`},
		{"pod with a trailing dash", createPod, "web-", `^web-[a-z0-9]{5}$`},
		{"pod with a trailing dot", createPod, "web.", `^web\.[a-z0-9]{5}$`},
		{"long prefix is cut", createPod, long, `^a{58}[a-z0-9]{5}$`},
		{"upper case", createPod, "Web.", ""},
		{"empty label", createPod, "a..", ""},
		{"leading dot", createPod, ".a", ""},
		{"namespace names are labels: no dot", createNamespace, "ns.", ""},
		{"namespace with a trailing dash", createNamespace, "ns-", `^ns-[a-z0-9]{5}$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := tc.create(ctx, admin, tc.prefix)
			if tc.want == "" {
				if !apierrors.IsInvalid(err) {
					t.Fatalf("generateName %q: err %v, want 422 Invalid", tc.prefix, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("generateName %q: %v", tc.prefix, err)
			}
			m, err := metaOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tc.want).MatchString(m.GetName()) {
				t.Errorf("generateName %q made %q, want %s", tc.prefix, m.GetName(), tc.want)
			}
		})
	}
}

func createEvent(ctx context.Context, c kubernetes.Interface, prefix string) (runtime.Object, error) {
	return c.CoreV1().Events("default").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: prefix},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "mypod"},
		Reason:         "Preempted", Message: "preempted by default/hi", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
}

func createPod(ctx context.Context, c kubernetes.Interface, prefix string) (runtime.Object, error) {
	pod := makePod("").obj()
	pod.GenerateName = prefix
	return c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
}

func createNamespace(ctx context.Context, c kubernetes.Interface, prefix string) (runtime.Object, error) {
	return c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
}
