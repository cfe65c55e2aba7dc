package apiserver

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

// The k8s.io/api types share a shape: a pointer to a struct with ObjectMeta,
// Spec and Status fields. These helpers move the Status field between two
// objects of one type without a per-type function.

// statusValue returns the Status field of obj, or an invalid Value when obj
// has none.
func statusValue(obj runtime.Object) reflect.Value {
	if obj == nil {
		return reflect.Value{}
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Status")
}

// setStatus replaces obj's status with a deep copy of from's (or the zero
// status when from is nil). Objects without a status are left alone.
func setStatus(obj, from runtime.Object) {
	dst := statusValue(obj)
	if !dst.IsValid() || !dst.CanSet() {
		return
	}
	if from == nil {
		dst.Set(reflect.Zero(dst.Type()))
		return
	}
	src := statusValue(from.DeepCopyObject())
	if src.IsValid() && src.Type() == dst.Type() {
		dst.Set(src)
	}
}
