package apiserver

import (
	"reflect"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// swaggerV2 is the Swagger 2.0 document of every operation of ops (all of
// reg's) and the definitions they reference.
func swaggerV2(reg *registry, ops []apiOperation) *spec.Swagger {
	b := newSchemaBuilder(false, kindsOf(servedKind(reg)))
	ref := func(t reflect.Type) *spec.Schema {
		return spec.RefSchema(b.refPrefix + b.define(t))
	}
	paths := map[string]spec.PathItem{}
	for _, op := range ops {
		item, ok := paths[op.path]
		if !ok {
			for _, p := range pathParameters(op.path) {
				item.Parameters = append(item.Parameters, parameterV2(p, "path"))
			}
		}
		o := &spec.Operation{OperationProps: spec.OperationProps{
			ID: op.id, Description: op.description, Tags: []string{operationTag(op.gvk.GroupVersion())},
			Schemes: []string{"https"}, Consumes: []string{"*/*"}, Produces: objectMediaTypes,
			Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
				401: responseV2("Unauthorized", nil),
			}}},
		}}
		for _, q := range op.params {
			o.Parameters = append(o.Parameters, parameterV2(q, "query"))
		}
		if op.body != nil {
			body := ref(op.body)
			if op.patch {
				body = ref(reflect.TypeFor[patchBody]())
				o.Consumes = patchMediaTypes
			}
			o.Parameters = append(o.Parameters, spec.Parameter{ParamProps: spec.ParamProps{
				Name: "body", In: "body", Required: op.method != "delete", Schema: body,
			}})
		}
		var answer *spec.Schema
		switch {
		case op.text:
			answer = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
			o.Produces = []string{"*/*"}
		case op.action == "watch" || op.action == "watchlist" || op.action == "list":
			answer = ref(op.response)
			o.Produces = watchMediaTypes
		default:
			answer = ref(op.response)
		}
		codes := o.Responses.StatusCodeResponses
		codes[200] = responseV2("OK", answer)
		if op.created {
			codes[201] = responseV2("Created", answer)
		}
		if op.method == "delete" || op.action == "post" {
			codes[202] = responseV2("Accepted", answer)
		}
		o.AddExtension("x-kubernetes-action", op.action)
		o.AddExtension(extGVK, map[string]string{"group": op.gvk.Group, "version": op.gvk.Version, "kind": op.gvk.Kind})
		switch op.method {
		case "get":
			item.Get = o
		case "put":
			item.Put = o
		case "post":
			item.Post = o
		case "patch":
			item.Patch = o
		case "delete":
			item.Delete = o
		}
		paths[op.path] = item
	}
	for _, res := range reg.resources() {
		b.define(typeOfKind(res.gvk))
		b.define(typeOfKind(res.listGVK))
	}
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: Version.GitVersion}},
		Paths:       &spec.Paths{Paths: paths},
		Definitions: spec.Definitions(b.defs),
	}}
}

// parameterV2 is q as a Swagger parameter in in (path or query).
func parameterV2(q queryParam, in string) spec.Parameter {
	return spec.Parameter{
		ParamProps:        spec.ParamProps{Name: q.name, In: in, Description: q.description, Required: in == "path"},
		SimpleSchema:      spec.SimpleSchema{Type: q.typ},
		CommonValidations: spec.CommonValidations{UniqueItems: true},
	}
}

// responseV2 is a Swagger response.
func responseV2(description string, schema *spec.Schema) spec.Response {
	return spec.Response{ResponseProps: spec.ResponseProps{Description: description, Schema: schema}}
}
