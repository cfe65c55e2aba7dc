package apiserver

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The schemas are derived from the Go types by reflection over their json
// tags, as openapi-gen derives kube-apiserver's from the same types: the
// descriptions from the generated SwaggerDoc methods, the names from the
// generated OpenAPIModelName methods, the types of the types that marshal
// themselves (Time, Quantity, IntOrString) from their OpenAPISchemaType
// methods, and the list and map semantics (+listType, +listMapKey,
// +structType, which are comments and so not visible to reflection) from
// client-go's structured-merge-diff schema of the same types.

// Extension names kube-apiserver's documents use.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extMapType       = "x-kubernetes-map-type"
)

// schemaBuilder collects the definitions of the types reachable from the
// types it is asked to define. It is not safe for concurrent use.
type schemaBuilder struct {
	// v3 selects OpenAPI v3's shapes: a described reference wrapped in
	// allOf (a $ref's siblings are ignored there) and oneOf for the types
	// that marshal as one of several.
	v3 bool
	// refPrefix is where references point: "#/definitions/" (v2) or
	// "#/components/schemas/" (v3).
	refPrefix string
	// gvks gives the group-version-kinds of a definition's Go type, those
	// served; none for a type that is not a kind.
	gvks func(reflect.Type) []schema.GroupVersionKind
	// smd is the structured-merge-diff schema of the types, for list and
	// map semantics; nil leaves them out.
	smd *smdschema.Schema

	defs  map[string]spec.Schema
	types map[string]reflect.Type
}

func newSchemaBuilder(v3 bool, gvks func(reflect.Type) []schema.GroupVersionKind) *schemaBuilder {
	prefix := "#/definitions/"
	if v3 {
		prefix = "#/components/schemas/"
	}
	return &schemaBuilder{v3: v3, refPrefix: prefix, gvks: gvks, smd: mergeSchema(),
		defs: map[string]spec.Schema{}, types: map[string]reflect.Type{}}
}

// mergeSchema is client-go's structured-merge-diff schema of the built-in
// types, or nil when it cannot be had.
func mergeSchema() *smdschema.Schema {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	tv, err := applyconfigurations.NewTypeConverter(apiScheme).ObjectToTyped(pod)
	if err != nil {
		return nil
	}
	return tv.Schema()
}

// modelName is the name kube-apiserver gives t's definition: the generated
// OpenAPIModelName, or else the package path with its domain reversed and
// the type name (k8s.io/api/core/v1.Pod is io.k8s.api.core.v1.Pod).
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(interface{ OpenAPIModelName() string }); ok {
		return n.OpenAPIModelName()
	}
	pkg := t.PkgPath()
	domain, rest, _ := strings.Cut(pkg, "/")
	parts := strings.Split(domain, ".")
	slices.Reverse(parts)
	name := strings.Join(parts, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}

// define adds the definition of the named struct type t (and of every type
// it references) and returns its name.
func (b *schemaBuilder) define(t reflect.Type) string {
	name := modelName(t)
	if _, done := b.types[name]; done {
		return name
	}
	b.types[name] = t
	b.defs[name] = spec.Schema{} // a placeholder, so a cycle ends here
	s := b.typeSchema(t)
	if gvks := b.gvks(t); len(gvks) > 0 {
		list := make([]any, 0, len(gvks))
		for _, gvk := range gvks {
			list = append(list, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
		s.AddExtension(extGVK, list)
	}
	if td, ok := b.smdType(name); ok && td.Map != nil && td.Map.ElementRelationship == smdschema.Atomic {
		s.AddExtension(extMapType, "atomic")
	}
	b.defs[name] = s
	return name
}

// typeSchema is the schema of the definition of t.
func (b *schemaBuilder) typeSchema(t reflect.Type) spec.Schema {
	var s spec.Schema
	s.Description = swaggerDoc(t)[""]
	zero := reflect.Zero(t).Interface()
	if st, ok := zero.(interface{ OpenAPISchemaType() []string }); ok {
		format := ""
		if f, ok := zero.(interface{ OpenAPISchemaFormat() string }); ok {
			format = f.OpenAPISchemaFormat()
		}
		if oneOf, ok := zero.(interface{ OpenAPIV3OneOfTypes() []string }); ok && b.v3 {
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
		} else {
			s.Type = st.OpenAPISchemaType()
		}
		s.Format = format
		return s
	}
	if _, ok := zero.(json.Marshaler); ok {
		// Marshals itself with no declared type (FieldsV1, RawExtension):
		// an object of unknown shape, as openapi-gen says of them.
		s.Type = spec.StringOrArray{"object"}
		return s
	}
	s.Type = spec.StringOrArray{"object"}
	b.addFields(&s, t, modelName(t))
	return s
}

// addFields adds the json fields of struct t, inlined embedded structs'
// included, to s, the schema of the definition named def.
func (b *schemaBuilder) addFields(s *spec.Schema, t reflect.Type, def string) {
	doc := swaggerDoc(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			b.addFields(s, et, def)
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop := b.fieldSchema(f.Type, doc[name], false)
		if v := f.Tag.Get("patchStrategy"); v != "" {
			prop.AddExtension(extPatchStrategy, v)
		}
		if v := f.Tag.Get("patchMergeKey"); v != "" {
			prop.AddExtension(extPatchMergeKey, v)
		}
		b.addListSemantics(&prop, def, name)
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[name] = prop
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !optional {
			s.Required = append(s.Required, name)
		}
	}
}

// fieldSchema is the schema of a field of type t, or of an element of a
// list or map: a reference to a struct stands alone there.
func (b *schemaBuilder) fieldSchema(t reflect.Type, description string, element bool) spec.Schema {
	pointer := false
	for t.Kind() == reflect.Pointer {
		t, pointer = t.Elem(), true
	}
	var s spec.Schema
	switch t.Kind() {
	case reflect.Struct:
		ref := spec.MustCreateRef(b.refPrefix + b.define(t))
		if !b.v3 || element {
			s.Ref = ref
			s.Description = description
			return s
		}
		if description == "" && pointer {
			s.Ref = ref
			return s
		}
		s.AllOf = []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: ref}}}
		s.Description = description
		if !pointer && b.defs[modelName(t)].Properties != nil {
			s.Default = map[string]any{}
		}
		return s
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s.Type, s.Format = spec.StringOrArray{"string"}, "byte"
			break
		}
		item := b.fieldSchema(t.Elem(), "", true)
		s.Type = spec.StringOrArray{"array"}
		s.Items = &spec.SchemaOrArray{Schema: &item}
	case reflect.Map:
		val := b.fieldSchema(t.Elem(), "", true)
		s.Type = spec.StringOrArray{"object"}
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &val}
	case reflect.String:
		s.Type = spec.StringOrArray{"string"}
	case reflect.Bool:
		s.Type = spec.StringOrArray{"boolean"}
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		s.Type, s.Format = spec.StringOrArray{"integer"}, "int32"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		s.Type, s.Format = spec.StringOrArray{"integer"}, "int64"
	case reflect.Float32:
		s.Type, s.Format = spec.StringOrArray{"number"}, "float"
	case reflect.Float64:
		s.Type, s.Format = spec.StringOrArray{"number"}, "double"
	case reflect.Interface:
		s.Type = spec.StringOrArray{"object"}
	}
	s.Description = description
	return s
}

// addListSemantics adds the list type and keys (or the map type) the
// merge schema gives field of the definition named parent.
func (b *schemaBuilder) addListSemantics(prop *spec.Schema, parent, field string) {
	td, ok := b.smdType(parent)
	if !ok || td.Map == nil {
		return
	}
	sf, ok := td.Map.FindField(field)
	if !ok {
		return
	}
	atom := sf.Type.Inlined
	if sf.Type.NamedType != nil {
		named, ok := b.smd.FindNamedType(*sf.Type.NamedType)
		if !ok {
			return
		}
		atom = named.Atom
	}
	switch {
	case atom.List != nil:
		switch atom.List.ElementRelationship {
		case smdschema.Associative:
			if len(atom.List.Keys) == 0 {
				prop.AddExtension(extListType, "set")
			} else {
				prop.AddExtension(extListType, "map")
				prop.AddExtension(extListMapKeys, slices.Clone(atom.List.Keys))
			}
		case smdschema.Atomic:
			prop.AddExtension(extListType, "atomic")
		}
	case atom.Map != nil && sf.Type.NamedType == nil && sf.Type.ElementRelationship != nil && *sf.Type.ElementRelationship == smdschema.Atomic:
		prop.AddExtension(extMapType, "atomic")
	case atom.Map != nil && sf.Type.NamedType == nil && atom.Map.ElementRelationship == smdschema.Atomic:
		prop.AddExtension(extMapType, "atomic")
	}
}

// smdType is the merge schema's type named name.
func (b *schemaBuilder) smdType(name string) (smdschema.TypeDef, bool) {
	if b.smd == nil {
		return smdschema.TypeDef{}, false
	}
	return b.smd.FindNamedType(name)
}

// swaggerDoc is t's generated SwaggerDoc: "" its description, json names
// its fields'.
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.Zero(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// kindsOf is the gvks function of the builders: the kinds of t's type in
// the scheme that served keeps, sorted.
func kindsOf(served func(schema.GroupVersionKind) bool) func(reflect.Type) []schema.GroupVersionKind {
	return func(t reflect.Type) []schema.GroupVersionKind {
		obj, ok := reflect.New(t).Interface().(runtime.Object)
		if !ok {
			return nil
		}
		all, _, err := apiScheme.ObjectKinds(obj)
		if err != nil {
			return nil
		}
		var out []schema.GroupVersionKind
		for _, gvk := range all {
			if gvk.Version != runtime.APIVersionInternal && served(gvk) && !slices.Contains(out, gvk) {
				out = append(out, gvk)
			}
		}
		slices.SortFunc(out, func(a, b schema.GroupVersionKind) int {
			return strings.Compare(a.Group+"/"+a.Version+"/"+a.Kind, b.Group+"/"+b.Version+"/"+b.Kind)
		})
		return out
	}
}
