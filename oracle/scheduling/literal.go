package scheduling

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// packageAliases are the import names podsafe's tests give the packages
// of the objects a reproducer holds.
var packageAliases = map[string]string{
	"k8s.io/api/apps/v1":                           "appsv1",
	"k8s.io/api/core/v1":                           "corev1",
	"k8s.io/api/policy/v1":                         "policyv1",
	"k8s.io/apimachinery/pkg/apis/meta/v1":         "metav1",
	"k8s.io/apimachinery/pkg/api/resource":         "resource",
	"k8s.io/apimachinery/pkg/types":                "types",
	"k8s.io/apimachinery/pkg/util/intstr":          "intstr",
	"github.com/podsafe/podsafe/oracle/scheduling": "scheduling",
}

// GoLiteral prints v as Go source: a composite literal with only the
// fields that are set, quantities as resource.MustParse, timestamps as
// metav1.Unix and pointers to scalars as ptr.To (k8s.io/utils/ptr).
func GoLiteral(v any) string { return GoLiteralIndent(v, 0) }

// GoLiteralIndent is GoLiteral for a value written indent tabs deep.
func GoLiteralIndent(v any, indent int) string {
	var b strings.Builder
	writeValue(&b, reflect.ValueOf(v), indent, false)
	return b.String()
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	timeType     = reflect.TypeFor[metav1.Time]()
)

// writeValue writes v; elided means the type may be left out (an element
// of a slice or map literal), typed that a scalar must carry its type.
func writeValue(b *strings.Builder, v reflect.Value, indent int, elided bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		e := v.Elem()
		if e.Kind() == reflect.Struct && e.Type() != quantityType && e.Type() != timeType {
			if !elided {
				b.WriteString("&")
			}
			writeValue(b, e, indent, elided)
			return
		}
		b.WriteString("ptr.To(")
		writeScalar(b, e, indent, true)
		b.WriteString(")")
	case reflect.Struct:
		writeStruct(b, v, indent, elided)
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if !elided {
			b.WriteString(typeString(v.Type()))
		}
		b.WriteString("{")
		if v.Len() == 0 {
			b.WriteString("}")
			return
		}
		if k := v.Type().Elem().Kind(); k == reflect.String || k >= reflect.Bool && k <= reflect.Float64 {
			for i := range v.Len() {
				if i > 0 {
					b.WriteString(", ")
				}
				writeScalar(b, v.Index(i), indent, false)
			}
			b.WriteString("}")
			return
		}
		b.WriteString("\n")
		for i := range v.Len() {
			tabs(b, indent+1)
			writeValue(b, v.Index(i), indent+1, true)
			b.WriteString(",\n")
		}
		tabs(b, indent)
		b.WriteString("}")
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if !elided {
			b.WriteString(typeString(v.Type()))
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i].Interface()) < fmt.Sprint(keys[j].Interface()) })
		b.WriteString("{")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, k, indent, true)
			b.WriteString(": ")
			writeValue(b, v.MapIndex(k), indent, true)
		}
		b.WriteString("}")
	case reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		writeValue(b, v.Elem(), indent, false)
	default:
		writeScalar(b, v, indent, false)
	}
}

// writeScalar writes a quantity, a time or a basic value; typed forces a
// conversion to a named type (inside ptr.To the constant has no context).
func writeScalar(b *strings.Builder, v reflect.Value, indent int, typed bool) {
	switch v.Type() {
	case quantityType:
		q := v.Interface().(resource.Quantity)
		fmt.Fprintf(b, "resource.MustParse(%q)", q.String())
		return
	case timeType:
		t := v.Interface().(metav1.Time)
		fmt.Fprintf(b, "metav1.Unix(%d, 0)", t.Unix())
		return
	}
	var lit string
	switch v.Kind() {
	case reflect.String:
		lit = strconv.Quote(v.String())
	case reflect.Bool:
		lit = strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lit = strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lit = strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		lit = strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Struct:
		writeStruct(b, v, indent, false)
		return
	default:
		lit = fmt.Sprintf("%#v", v.Interface())
	}
	if typed && (v.Type().PkgPath() != "" || v.Kind() != reflect.String && v.Kind() != reflect.Bool && v.Kind() != reflect.Int) {
		lit = typeString(v.Type()) + "(" + lit + ")"
	}
	b.WriteString(lit)
}

func writeStruct(b *strings.Builder, v reflect.Value, indent int, elided bool) {
	if v.Type() == quantityType || v.Type() == timeType {
		writeScalar(b, v, indent, false)
		return
	}
	if !elided {
		b.WriteString(typeString(v.Type()))
	}
	t := v.Type()
	var set []int
	for i := range t.NumField() {
		if t.Field(i).IsExported() && !isEmpty(v.Field(i)) {
			set = append(set, i)
		}
	}
	b.WriteString("{")
	if len(set) == 0 {
		b.WriteString("}")
		return
	}
	b.WriteString("\n")
	for _, i := range set {
		tabs(b, indent+1)
		b.WriteString(t.Field(i).Name)
		b.WriteString(": ")
		writeValue(b, v.Field(i), indent+1, false)
		b.WriteString(",\n")
	}
	tabs(b, indent)
	b.WriteString("}")
}

// typeString names t as Go source with podsafe's import aliases.
func typeString(t reflect.Type) string {
	if t.Name() != "" {
		if alias, ok := packageAliases[t.PkgPath()]; ok {
			return alias + "." + t.Name()
		}
		return t.String()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeString(t.Elem())
	case reflect.Slice:
		return "[]" + typeString(t.Elem())
	case reflect.Map:
		return "map[" + typeString(t.Key()) + "]" + typeString(t.Elem())
	}
	return t.String()
}

func tabs(b *strings.Builder, n int) {
	for range n {
		b.WriteByte('\t')
	}
}

// isEmpty reports whether v prints as nothing: a zero value, an empty
// slice or map, or a struct (not a quantity or time) of empty fields.
func isEmpty(v reflect.Value) bool {
	switch {
	case v.IsZero():
		return true
	case v.Kind() == reflect.Slice || v.Kind() == reflect.Map:
		return v.Len() == 0
	case v.Kind() == reflect.Struct && v.Type() != quantityType && v.Type() != timeType:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !isEmpty(v.Field(i)) {
				return false
			}
		}
		return true
	}
	return false
}
