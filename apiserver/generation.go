package apiserver

// metadata.generation: bumped when an object's spec changes.

import (
	"reflect"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// specOf returns obj's Spec field, or an invalid Value when its kind has
// none. Reflection, not encoding: it runs on every create and update.
func specOf(obj runtime.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Spec")
}

// hasSpec reports whether obj has a spec whose changes metadata.generation
// counts (every served kind with a spec; pods too, as kube-apiserver does).
func hasSpec(obj runtime.Object) bool { return specOf(obj).IsValid() }

// bumpGeneration increments out's metadata.generation when its spec differs
// from cur's, as kube-apiserver does, so controllers can report
// status.observedGeneration.
func bumpGeneration(cur, out runtime.Object) {
	a, b := specOf(cur), specOf(out)
	if !a.IsValid() || !b.IsValid() || apiequality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	cm, err1 := metaOf(cur)
	om, err2 := metaOf(out)
	if err1 != nil || err2 != nil {
		return
	}
	om.SetGeneration(cm.GetGeneration() + 1)
}
