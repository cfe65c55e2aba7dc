package apiserver

import (
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Media types the operations' bodies are documented in: what the server
// decodes and encodes.
var (
	objectMediaTypes = []string{mediaOpenAPIJSON, "application/yaml", "application/vnd.kubernetes.protobuf"}
	patchMediaTypes  = []string{mediaJSONPatch, mediaMergePatch, mediaStrategicPatch, mediaApplyPatch}
	watchMediaTypes  = []string{mediaOpenAPIJSON, "application/yaml", "application/vnd.kubernetes.protobuf",
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"}
)

// openAPIV3 is the OpenAPI 3.0 document of group version gv of reg: ops'
// paths and the schemas they reference.
func openAPIV3(reg *registry, gv schema.GroupVersion, ops []apiOperation) *spec3.OpenAPI {
	b := newSchemaBuilder(true, kindsOf(servedKind(reg)))
	ref := func(t reflect.Type) *spec.Schema {
		return spec.RefSchema(b.refPrefix + b.define(t))
	}
	tag := operationTag(gv)
	paths := map[string]*spec3.Path{}
	for _, op := range ops {
		p := paths[op.path]
		if p == nil {
			p = &spec3.Path{PathProps: spec3.PathProps{Parameters: pathParametersV3(op.path)}}
			paths[op.path] = p
		}
		o := &spec3.Operation{OperationProps: spec3.OperationProps{
			Description: op.description, OperationId: op.id, Tags: []string{tag},
			Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
				401: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
			}}},
		}}
		for _, q := range op.params {
			o.Parameters = append(o.Parameters, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
				Name: q.name, In: "query", Description: q.description,
				Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{q.typ}, UniqueItems: true}},
			}})
		}
		if op.body != nil {
			types := objectMediaTypes
			body := ref(op.body)
			if op.patch {
				types, body = patchMediaTypes, ref(reflect.TypeFor[patchBody]())
			}
			o.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Required: op.method != "delete", Content: content(types, body)}}
		}
		answer := &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "OK"}}
		switch {
		case op.text:
			answer.Content = content([]string{"*/*"}, &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}})
		case op.action == "watch" || op.action == "watchlist" || op.action == "list":
			answer.Content = content(watchMediaTypes, ref(op.response))
		default:
			answer.Content = content(objectMediaTypes, ref(op.response))
		}
		o.Responses.StatusCodeResponses[200] = answer
		if op.created {
			o.Responses.StatusCodeResponses[201] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Created", Content: answer.Content}}
		}
		if op.method == "delete" || op.action == "post" {
			o.Responses.StatusCodeResponses[202] = &spec3.Response{ResponseProps: spec3.ResponseProps{Description: "Accepted", Content: answer.Content}}
		}
		o.AddExtension("x-kubernetes-action", op.action)
		o.AddExtension(extGVK, map[string]string{"group": op.gvk.Group, "version": op.gvk.Version, "kind": op.gvk.Kind})
		setOperationV3(p, op.method, o)
	}
	// Every served kind and its list are defined, whether or not an
	// operation reached them (the list of a kind with no collection).
	for _, res := range reg.byGV[gv] {
		b.define(typeOfKind(res.gvk))
		b.define(typeOfKind(res.listGVK))
	}
	schemas := map[string]*spec.Schema{}
	for name, s := range b.defs {
		schemas[name] = &s
	}
	return &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: Version.GitVersion}},
		Paths:      &spec3.Paths{Paths: paths},
		Components: &spec3.Components{Schemas: schemas},
	}
}

// operationTag is the tag of gv's operations: core_v1, apps_v1,
// coordination_v1, ...
func operationTag(gv schema.GroupVersion) string {
	group, _, _ := strings.Cut(gv.Group, ".")
	if group == "" {
		group = "core"
	}
	return group + "_" + gv.Version
}

// patchBody stands for io.k8s.apimachinery.pkg.apis.meta.v1.Patch, the
// body of every PATCH: its definition is an object of any shape.
type patchBody struct{}

// OpenAPIModelName names patchBody as kube-apiserver names metav1.Patch.
func (patchBody) OpenAPIModelName() string { return "io.k8s.apimachinery.pkg.apis.meta.v1.Patch" }

// SwaggerDoc is metav1.Patch's description.
func (patchBody) SwaggerDoc() map[string]string {
	return map[string]string{"": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}
}

// MarshalJSON makes the definition an object of unknown shape; it is never
// called on a value.
func (patchBody) MarshalJSON() ([]byte, error) { return []byte("{}"), nil }

// content is the same schema under every media type of types.
func content(types []string, s *spec.Schema) map[string]*spec3.MediaType {
	out := map[string]*spec3.MediaType{}
	for _, t := range types {
		out[t] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: s}}
	}
	return out
}

// pathParametersV3 are the {name} and {namespace} parameters of path.
func pathParametersV3(path string) []*spec3.Parameter {
	var out []*spec3.Parameter
	for _, p := range pathParameters(path) {
		out = append(out, &spec3.Parameter{ParameterProps: spec3.ParameterProps{
			Name: p.name, In: "path", Required: true, Description: p.description,
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}, UniqueItems: true}},
		}})
	}
	return out
}

// pathParameters are the parameters in path's braces.
func pathParameters(path string) []queryParam {
	var out []queryParam
	if strings.Contains(path, "{name}") {
		out = append(out, queryParam{name: "name", typ: "string", description: "name of the object"})
	}
	if strings.Contains(path, "{namespace}") {
		out = append(out, queryParam{name: "namespace", typ: "string", description: "object name and auth scope, such as for teams and projects"})
	}
	return out
}

// setOperationV3 sets p's operation of method.
func setOperationV3(p *spec3.Path, method string, o *spec3.Operation) {
	switch method {
	case "get":
		p.Get = o
	case "put":
		p.Put = o
	case "post":
		p.Post = o
	case "patch":
		p.Patch = o
	case "delete":
		p.Delete = o
	}
}
