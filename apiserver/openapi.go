package apiserver

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The server publishes the OpenAPI documents kube-apiserver does, derived
// from the Go types it serves (openapi_schema.go) and the routes of its
// registry (openapi_paths.go):
//
//   - /openapi/v3, the index of the group-version documents, each under
//     its serverRelativeURL with the hash of its content;
//   - /openapi/v3/api/v1 and /openapi/v3/apis/GROUP/VERSION, an OpenAPI
//     3.0 document of the group version's paths and the schemas they use
//     (kubectl explain reads these; kubectl's check for server-side field
//     validation looks for the fieldValidation parameter of each PATCH);
//   - /openapi/v2, the Swagger 2.0 document of every path and definition,
//     which client-go asks for only as gnostic protobuf (kubectl's
//     client-side validation, used when a kind is not in the v3 document).
//
// /openapi/v2 is negotiated by Accept as kube-openapi's handler does: the
// gnostic protobuf to a client that asks for it first (client-go), the JSON
// otherwise. Every document carries the hash of its content as its ETag,
// and a request whose If-None-Match names it gets 304.

// openAPIPrefix covers every OpenAPI path; route sends it and everything
// below it to serveOpenAPI.
const openAPIPrefix = "/openapi"

// Media types of the documents.
const (
	// mediaOpenAPIV2Proto is the protobuf's Content-Type as kube-openapi's
	// handler answers it; client-go asks for the older spelling with "@",
	// which Go's mime package (and so client-go's reading of the answer)
	// refuses.
	mediaOpenAPIV2Proto = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	mediaOpenAPIJSON    = "application/json"
)

// openAPIDocument is one encoded document and its hash.
type openAPIDocument struct {
	body        []byte
	contentType string
	hash        string
}

// openAPIDocuments are the encoded documents of a registry.
type openAPIDocuments struct {
	// index is /openapi/v3; v3 the group-version documents by their path
	// below it (api/v1, apis/apps/v1).
	index openAPIDocument
	v3    map[string]openAPIDocument
	// v2JSON is the Swagger document as JSON, v2 as served (protobuf).
	v2JSON, v2 openAPIDocument
}

// builtOpenAPI is the documents of the resource and review tables, built on
// the first request for any of them and shared by every server of the
// process: they are a function of the tables, which do not change.
var builtOpenAPI = sync.OnceValues(func() (*openAPIDocuments, error) {
	reg, err := newRegistry(resourceTable)
	if err == nil {
		err = reg.addReviews(reviewTable)
	}
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return buildOpenAPI(reg)
})

// serveOpenAPI answers the paths below openAPIPrefix.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	docs, err := builtOpenAPI()
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	rel := strings.Trim(strings.TrimPrefix(path, openAPIPrefix), "/")
	switch {
	case rel == "v2" && wantsProtobuf(r.Header.Get("Accept")):
		writeOpenAPI(w, r, docs.v2)
	case rel == "v2":
		writeOpenAPI(w, r, docs.v2JSON)
	case rel == "v3":
		writeOpenAPI(w, r, docs.index)
	case strings.HasPrefix(rel, "v3/"):
		doc, ok := docs.v3[strings.TrimPrefix(rel, "v3/")]
		if !ok {
			writeError(w, notFoundPath(path))
			return
		}
		writeOpenAPI(w, r, doc)
	default:
		writeError(w, notFoundPath(path))
	}
}

// writeOpenAPI writes doc with its ETag, as kube-apiserver does, or 304
// when the request's If-None-Match names it.
func writeOpenAPI(w http.ResponseWriter, r *http.Request, doc openAPIDocument) {
	etag := strconv.Quote(doc.hash)
	w.Header().Set("Etag", etag)
	w.Header().Set("Vary", "Accept")
	if match := r.Header.Get("If-None-Match"); match != "" && (match == etag || match == doc.hash) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", doc.contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc.body)
}

// wantsProtobuf reports whether an Accept header asks for the v2 protobuf
// before JSON (its first media type that is either).
func wantsProtobuf(accept string) bool {
	for _, clause := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(clause), ";")
		switch {
		case strings.Contains(mt, "protobuf"):
			return true
		case mt == mediaOpenAPIJSON || mt == "*/*" || mt == "application/*":
			return false
		}
	}
	return false
}

// buildOpenAPI builds and encodes every document of reg.
func buildOpenAPI(reg *registry) (*openAPIDocuments, error) {
	docs := &openAPIDocuments{v3: map[string]openAPIDocument{}}
	index := map[string]map[string]string{}
	var all []apiOperation
	for _, gv := range servedGroupVersions(reg) {
		var ops []apiOperation
		for _, res := range reg.byGV[gv] {
			ops = append(ops, resourceOperations(res)...)
		}
		for _, rev := range reg.reviews[gv] {
			ops = append(ops, reviewOperations(rev)...)
		}
		all = append(all, ops...)
		doc, err := encodeOpenAPI(openAPIV3(reg, gv, ops), mediaOpenAPIJSON)
		if err != nil {
			return nil, fmt.Errorf("openapi v3 %s: %w", gv, err)
		}
		docs.v3[gvPath(gv)] = doc
		index[gvPath(gv)] = map[string]string{"serverRelativeURL": openAPIPrefix + "/v3/" + gvPath(gv) + "?hash=" + doc.hash}
	}
	var err error
	if docs.index, err = encodeOpenAPI(map[string]any{"paths": index}, mediaOpenAPIJSON); err != nil {
		return nil, fmt.Errorf("openapi v3 index: %w", err)
	}
	if docs.v2JSON, err = encodeOpenAPI(swaggerV2(reg, all), mediaOpenAPIJSON); err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	// The protobuf is gnostic's model of the same JSON, as kube-openapi's
	// handler makes it.
	parsed, err := openapiv2.ParseDocument(docs.v2JSON.body)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	pb, err := proto.Marshal(parsed)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	docs.v2 = openAPIDocument{body: pb, contentType: mediaOpenAPIV2Proto, hash: docs.v2JSON.hash}
	return docs, nil
}

// encodeOpenAPI encodes v as JSON with the hash kube-apiserver's handler
// uses (SHA-512, hex).
func encodeOpenAPI(v any, contentType string) (openAPIDocument, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return openAPIDocument{}, err
	}
	return openAPIDocument{body: body, contentType: contentType, hash: fmt.Sprintf("%X", sha512.Sum512(body))}, nil
}

// servedGroupVersions is every group version of reg, resources' and
// reviews', core first and then by group as discovery orders them.
func servedGroupVersions(reg *registry) []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, g := range append([]string{""}, reg.groups...) {
		for _, v := range reg.versions[g] {
			out = append(out, schema.GroupVersion{Group: g, Version: v})
		}
	}
	return out
}

// servedKind reports whether gvk's group version is served by reg: the
// kinds a definition's x-kubernetes-group-version-kind lists.
func servedKind(reg *registry) func(schema.GroupVersionKind) bool {
	return func(gvk schema.GroupVersionKind) bool {
		gv := gvk.GroupVersion()
		return len(reg.byGV[gv]) > 0 || len(reg.reviews[gv]) > 0
	}
}

// gvPath is the path of a group version below /openapi/v3.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
