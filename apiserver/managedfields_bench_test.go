package apiserver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BenchmarkManagedFields measures what managed fields cost a write: a
// kubelet's status update of a pod (the most frequent write) and an apply
// of a pod's labels and container.
func BenchmarkManagedFields(b *testing.B) {
	reg, err := newRegistry(resourceTable)
	if err != nil {
		b.Fatal(err)
	}
	res, ok := reg.lookup("", "v1", "pods")
	if !ok {
		b.Fatal("no pods")
	}
	created := makePod("p").label("app", "web").obj()
	created.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx"}}
	prepareCreate(res, created)
	fm, err := fieldManagerFor(&requestInfo{res: res})
	if err != nil {
		b.Fatal(err)
	}
	stored := fm.UpdateNoErrors(res.newObject(), created, "creator").(*corev1.Pod)
	status, err := fieldManagerFor(&requestInfo{res: res, subresource: subStatus})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("status update", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			upd := stored.DeepCopy()
			upd.Status.Message = fmt.Sprintf("beat %d", i)
			status.UpdateNoErrors(stored, upd, "kubelet")
		}
	})
	cfg := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "default", "labels": map[string]any{"tier": "web"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx:2"}}},
	}}
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := fm.Apply(stored, cfg.DeepCopy(), "applier", true); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTypeConverter measures building the type information from the
// served OpenAPI definitions, which a process does once.
func BenchmarkTypeConverter(b *testing.B) {
	reg, err := newRegistry(resourceTable)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if _, err := newTypeConverter(reg); err != nil {
			b.Fatal(err)
		}
	}
}
