package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"
)

// openAPIDiscovery is a discovery client of e as admin, which reads the
// documents as kubectl does.
func openAPIDiscovery(t *testing.T, e *testEnv) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(e.restConfig(IdentityAdmin))
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// hasGVK reports whether an x-kubernetes-group-version-kind extension value
// (decoded from JSON) names gvk.
func hasGVK(ext any, gvk schema.GroupVersionKind) bool {
	var list []map[string]string
	b, _ := json.Marshal(ext)
	if err := json.Unmarshal(b, &list); err != nil {
		var one map[string]string
		if json.Unmarshal(b, &one) != nil {
			return false
		}
		list = append(list, one)
	}
	for _, m := range list {
		if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
			return true
		}
	}
	return false
}

// refs collects every $ref in a JSON value.
func refs(v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "$ref" {
				out[s] = true
			}
			refs(x, out)
		}
	case []any:
		for _, x := range v {
			refs(x, out)
		}
	}
}

// TestOpenAPIV3 reads every group version document through client-go's
// openapi3 root, as kubectl explain and kubectl's field validation check
// do: every served kind and its list have a schema with their GVK, every
// reference resolves, the descriptions are SwaggerDoc's, the struct tags'
// and merge schema's list semantics and the special types' formats are
// there, and every PATCH of a kind has the fieldValidation parameter.
func TestOpenAPIV3(t *testing.T) {
	e := newTestEnv(t)
	dc := openAPIDiscovery(t, e)
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatalf("GroupVersions: %v", err)
	}
	for _, gv := range servedGroupVersions(e.srv.reg) {
		if !slices.Contains(gvs, gv) {
			t.Errorf("the index lacks %s (has %v)", gv, gvs)
		}
	}
	for _, res := range e.srv.reg.resources() {
		doc, err := root.GVSpec(res.gvk.GroupVersion())
		if err != nil {
			t.Fatalf("GVSpec %s: %v", res.gvk.GroupVersion(), err)
		}
		for _, gvk := range []schema.GroupVersionKind{res.gvk, res.listGVK} {
			name := modelName(typeOfKind(gvk))
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Errorf("%s: no schema %s", gvk, name)
				continue
			}
			if !hasGVK(s.Extensions[extGVK], gvk) {
				t.Errorf("%s: schema %s has GVKs %v", gvk, name, s.Extensions[extGVK])
			}
		}
		patched := false
		for path, p := range doc.Paths.Paths {
			if p.Patch == nil || !hasGVK(p.Patch.Extensions[extGVK], res.gvk) {
				continue
			}
			patched = true
			if !slices.ContainsFunc(p.Patch.Parameters, func(q *spec3.Parameter) bool { return q.Name == "fieldValidation" && q.In == "query" }) {
				t.Errorf("PATCH %s has no fieldValidation parameter", path)
			}
		}
		if !patched {
			t.Errorf("%s: no PATCH operation", res.gvk)
		}
	}

	core, err := root.GVSpec(corev1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	schemas := core.Components.Schemas
	podSpec := schemas["io.k8s.api.core.v1.PodSpec"]
	containers := podSpec.Properties["containers"]
	if got, want := containers.Description, (corev1.PodSpec{}).SwaggerDoc()["containers"]; got != want {
		t.Errorf("PodSpec.containers description = %q, want SwaggerDoc's %q", got, want)
	}
	wantExt := spec.Extensions{
		extListType: "map", extListMapKeys: []any{"name"}, extPatchStrategy: "merge", extPatchMergeKey: "name",
	}
	if diff := cmp.Diff(wantExt, containers.Extensions); diff != "" {
		t.Errorf("PodSpec.containers extensions (-want +got):\n%s", diff)
	}
	if !slices.Contains(podSpec.Required, "containers") {
		t.Errorf("PodSpec required = %v, want containers", podSpec.Required)
	}
	if containers.Items.Schema.Ref.String() != "#/components/schemas/io.k8s.api.core.v1.Container" {
		t.Errorf("containers items = %v", containers.Items.Schema.Ref.String())
	}
	if s := schemas["io.k8s.api.core.v1.Pod"].Properties["metadata"]; len(s.AllOf) != 1 ||
		s.AllOf[0].Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" ||
		s.Description != (corev1.Pod{}).SwaggerDoc()["metadata"] {
		t.Errorf("Pod.metadata = %+v", s)
	}
	formats := map[string][2]string{
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"string", "date-time"},
		"io.k8s.api.core.v1.ContainerPort":          {"object", ""},
	}
	for name, want := range formats {
		s := schemas[name]
		if got := [2]string{strings.Join(s.Type, ","), s.Format}; got != want {
			t.Errorf("%s type, format = %v, want %v", name, got, want)
		}
	}
	if s := schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]; s.Format != "int-or-string" || len(s.OneOf) != 2 {
		t.Errorf("IntOrString = %+v, want int-or-string, oneOf integer and string", s)
	}
	if s := schemas["io.k8s.api.core.v1.ContainerPort"].Properties["containerPort"]; s.Format != "int32" || s.Type[0] != "integer" {
		t.Errorf("ContainerPort.containerPort = %v %v, want integer int32", s.Type, s.Format)
	}
	if s := schemas["io.k8s.api.core.v1.PodSpec"].Properties["activeDeadlineSeconds"]; s.Format != "int64" {
		t.Errorf("PodSpec.activeDeadlineSeconds format = %q, want int64", s.Format)
	}
	if s := schemas["io.k8s.api.core.v1.ResourceRequirements"].Properties["limits"]; s.AdditionalProperties == nil ||
		s.AdditionalProperties.Schema.Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity" {
		t.Errorf("ResourceRequirements.limits = %+v, want a map of Quantity", s)
	}
	if s := schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]; len(s.OneOf) != 2 {
		t.Errorf("Quantity = %+v, want oneOf string and number", s)
	}
	if d := schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].Properties["name"].Description; d != (metav1.ObjectMeta{}).SwaggerDoc()["name"] {
		t.Errorf("ObjectMeta.name description = %q", d)
	}

	// Every reference of every document resolves in that document.
	for _, gv := range gvs {
		raw, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		body, err := raw[gvPath(gv)].Schema("application/json")
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		refs(doc, found)
		defined := doc["components"].(map[string]any)["schemas"].(map[string]any)
		for ref := range found {
			if _, ok := defined[strings.TrimPrefix(ref, "#/components/schemas/")]; !ok {
				t.Errorf("%s: %s does not resolve", gv, ref)
			}
		}
	}
}

// TestOpenAPIV2 reads /openapi/v2 as client-go's discovery does (the
// gnostic protobuf) and builds kubectl's models of it, which fails on a
// reference that does not resolve; every served kind is found by GVK and
// has SwaggerDoc's descriptions.
func TestOpenAPIV2(t *testing.T) {
	e := newTestEnv(t)
	doc, err := openAPIDiscovery(t, e).OpenAPISchema()
	if err != nil {
		t.Fatalf("OpenAPISchema: %v", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		t.Fatalf("NewOpenAPIData: %v", err)
	}
	byGVK := map[schema.GroupVersionKind]string{}
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		for _, ext := range d.GetValue().GetVendorExtension() {
			if ext.GetName() != extGVK {
				continue
			}
			var list []map[string]string
			if err := yaml.Unmarshal([]byte(ext.GetValue().GetYaml()), &list); err != nil {
				t.Fatalf("%s: %v", d.GetName(), err)
			}
			for _, m := range list {
				byGVK[schema.GroupVersionKind{Group: m["group"], Version: m["version"], Kind: m["kind"]}] = d.GetName()
			}
		}
	}
	for _, res := range e.srv.reg.resources() {
		for _, gvk := range []schema.GroupVersionKind{res.gvk, res.listGVK} {
			name, ok := byGVK[gvk]
			if !ok {
				t.Errorf("no definition has GVK %s", gvk)
				continue
			}
			if models.LookupModel(name) == nil {
				t.Errorf("%s: model %s not found", gvk, name)
			}
		}
	}
	pod, ok := models.LookupModel("io.k8s.api.core.v1.Pod").(*proto.Kind)
	if !ok {
		t.Fatalf("Pod model = %T", models.LookupModel("io.k8s.api.core.v1.Pod"))
	}
	if got, want := pod.GetDescription(), (corev1.Pod{}).SwaggerDoc()[""]; got != want {
		t.Errorf("Pod description = %q, want %q", got, want)
	}
	spec := models.LookupModel("io.k8s.api.core.v1.PodSpec").(*proto.Kind)
	if got, want := spec.Fields["nodeName"].GetDescription(), (corev1.PodSpec{}).SwaggerDoc()["nodeName"]; got != want {
		t.Errorf("PodSpec.nodeName description = %q, want %q", got, want)
	}
	if ext := spec.Fields["containers"].GetExtensions(); ext[extPatchMergeKey] != "name" {
		t.Errorf("PodSpec.containers extensions = %v, want patch merge key name", ext)
	}
}

// TestOpenAPIV2JSON: the Swagger JSON the protobuf is made from parses as
// a Swagger 2.0 document with the same definitions and paths.
func TestOpenAPIV2JSON(t *testing.T) {
	docs, err := builtOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var sw spec.Swagger
	if err := json.Unmarshal(docs.v2JSON.body, &sw); err != nil {
		t.Fatal(err)
	}
	if sw.Swagger != "2.0" {
		t.Errorf("swagger = %q", sw.Swagger)
	}
	if _, ok := sw.Definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]; !ok {
		t.Error("no ObjectMeta definition")
	}
	op := sw.Paths.Paths["/api/v1/namespaces/{namespace}/pods/{name}"].Patch
	if op == nil || !slices.ContainsFunc(op.Parameters, func(p spec.Parameter) bool { return p.Name == "fieldValidation" }) {
		t.Errorf("pods PATCH = %+v, want the fieldValidation parameter", op)
	}
}

// TestOpenAPIHTTP: the index names each document with the hash that is its
// ETag, v2 is gnostic protobuf, and an unknown document is 404.
func TestOpenAPIHTTP(t *testing.T) {
	e := newTestEnv(t)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp := e.rawRequest(http.MethodGet, path, IdentityAdmin, "", nil)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	resp, body := get("/openapi/v3")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/openapi/v3: %d %s", resp.StatusCode, body)
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Paths) != len(servedGroupVersions(e.srv.reg)) {
		t.Errorf("index has %d documents, want %d", len(index.Paths), len(servedGroupVersions(e.srv.reg)))
	}
	for p, entry := range index.Paths {
		url, hash, _ := strings.Cut(entry.ServerRelativeURL, "?hash=")
		if url != "/openapi/v3/"+p {
			t.Errorf("%s: url %s", p, url)
		}
		resp, _ := get(entry.ServerRelativeURL)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Etag") != strconv.Quote(hash) {
			t.Errorf("%s: %d, ETag %s, want hash %s", p, resp.StatusCode, resp.Header.Get("Etag"), hash)
		}
	}
	// v2 by Accept: JSON unless protobuf is asked for first.
	getAccept := func(path, accept, ifNoneMatch string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, e.http.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokenOf(IdentityAdmin))
		req.Header.Set("Accept", accept)
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		resp, err := e.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	resp, body = getAccept("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json", "")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != mediaOpenAPIV2Proto {
		t.Errorf("/openapi/v2 asking for protobuf: %d %s", resp.StatusCode, ct)
	}
	if _, err := openapiv2.ParseDocument(body); err == nil {
		t.Errorf("/openapi/v2 parsed as JSON/YAML; want protobuf")
	}
	for _, accept := range []string{"", "application/json", "*/*", "application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf"} {
		resp, body := getAccept("/openapi/v2", accept, "")
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != mediaOpenAPIJSON {
			t.Errorf("/openapi/v2 with Accept %q: %d %s", accept, resp.StatusCode, ct)
		} else if _, err := openapiv2.ParseDocument(body); err != nil {
			t.Errorf("/openapi/v2 JSON with Accept %q: %v", accept, err)
		}
		if tag := resp.Header.Get("Etag"); tag != "" {
			if resp, _ := getAccept("/openapi/v2", accept, tag); resp.StatusCode != http.StatusNotModified {
				t.Errorf("/openapi/v2 with If-None-Match %s: %d, want 304", tag, resp.StatusCode)
			}
		}
	}
	for _, p := range []string{"/openapi/v3/apis/apps/v2", "/openapi/v4", "/openapi"} {
		if resp, body := get(p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", p, resp.StatusCode, body)
		}
	}
}

// TestOpenAPIModelName: the names are kube-apiserver's, from the generated
// OpenAPIModelName or, for a type with none, the reversed package path.
func TestOpenAPIModelName(t *testing.T) {
	for _, tc := range []struct {
		t    reflect.Type
		want string
	}{
		{reflect.TypeFor[corev1.Pod](), "io.k8s.api.core.v1.Pod"},
		{reflect.TypeFor[metav1.ObjectMeta](), "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
		{reflect.TypeFor[resourceSpec](), "com.github.podsafe.podsafe.apiserver.resourceSpec"},
	} {
		if got := modelName(tc.t); got != tc.want {
			t.Errorf("modelName(%s) = %q, want %q", tc.t, got, tc.want)
		}
	}
}
