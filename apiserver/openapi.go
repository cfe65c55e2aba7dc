package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The server publishes a minimal OpenAPI v3 description: no schemas, only
// each resource's PATCH operation with its group-version-kind and the
// fieldValidation parameter. That is what kubectl looks for to decide that
// the server validates fields itself (it then sends fieldValidation=Strict
// instead of downloading schemas to validate on the client).

// openAPIPrefix is where the OpenAPI v3 documents are served.
const openAPIPrefix = "/openapi/v3"

// serveOpenAPI answers /openapi/v3 (the index of group-version documents)
// and /openapi/v3/api/v1, /openapi/v3/apis/GROUP/VERSION.
func (s *Server) serveOpenAPI(w http.ResponseWriter, path string) {
	rel := strings.Trim(strings.TrimPrefix(path, openAPIPrefix), "/")
	if rel == "" {
		paths := map[string]any{}
		for gv := range s.reg.byGV {
			p := gvPath(gv)
			paths[p] = map[string]string{"serverRelativeURL": openAPIPrefix + "/" + p + "?hash=" + Version.GitVersion}
		}
		writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
		return
	}
	for gv, infos := range s.reg.byGV {
		if gvPath(gv) != rel {
			continue
		}
		paths := map[string]any{}
		for _, res := range infos {
			objectPath := "/" + rel + "/" + res.resource + "/{name}"
			if res.namespaced {
				objectPath = "/" + rel + "/namespaces/{namespace}/" + res.resource + "/{name}"
			}
			paths[objectPath] = map[string]any{"patch": map[string]any{
				"x-kubernetes-group-version-kind": map[string]string{
					"group": res.gvk.Group, "version": res.gvk.Version, "kind": res.gvk.Kind,
				},
				"parameters": []map[string]any{{
					"name": "fieldValidation", "in": "query", "schema": map[string]string{"type": "string"},
				}},
				"responses": map[string]any{"200": map[string]string{"description": "OK"}},
			}}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"openapi": "3.0.0",
			"info":    map[string]string{"title": "podsafe", "version": Version.GitVersion},
			"paths":   paths,
		})
		return
	}
	writeError(w, notFoundPath(path))
}

// gvPath is the path of a group version below /openapi/v3.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}
