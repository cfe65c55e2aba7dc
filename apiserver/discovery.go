package apiserver

import (
	"net"
	"net/http"
	"runtime"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Version is what /version reports: the Kubernetes API version whose wire
// protocol the server speaks (that of the k8s.io modules it is built with).
var Version = version.Info{
	Major:      "1",
	Minor:      "37",
	GitVersion: "v1.37.2-podsafe",
	Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	GoVersion:  runtime.Version(),
	Compiler:   runtime.Compiler,
}

// serveVersion answers /version.
func (s *Server) serveVersion(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, Version)
}

// serveRoot lists the served paths, as kube-apiserver does at /.
func (s *Server) serveRoot(w http.ResponseWriter) {
	paths := []string{"/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"}
	for _, g := range s.reg.groups {
		paths = append(paths, "/apis/"+g)
		for _, v := range s.reg.versions[g] {
			paths = append(paths, "/apis/"+g+"/"+v)
		}
	}
	writeJSON(w, http.StatusOK, metav1.RootPaths{Paths: paths})
}

// serveCoreVersions answers /api. Clients asking for aggregated discovery
// get the legacy document with Content-Type application/json, which tells
// client-go (and kubectl) to fall back to per-group discovery.
func (s *Server) serveCoreVersions(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil && h == "" {
		host = "localhost" + host
	}
	writeJSON(w, http.StatusOK, metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: s.reg.versions[""],
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: host},
		},
	})
}

// apiGroup describes one served group.
func (s *Server) apiGroup(group string) metav1.APIGroup {
	g := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: group}
	for _, v := range s.reg.versions[group] {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
	}
	if len(g.Versions) > 0 {
		g.PreferredVersion = g.Versions[0]
	}
	return g
}

// serveGroups answers /apis.
func (s *Server) serveGroups(w http.ResponseWriter) {
	list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range s.reg.groups {
		list.Groups = append(list.Groups, s.apiGroup(g))
	}
	writeJSON(w, http.StatusOK, list)
}

// serveGroup answers /apis/GROUP.
func (s *Server) serveGroup(w http.ResponseWriter, group string) {
	if len(s.reg.versions[group]) == 0 || group == "" {
		writeError(w, notFoundPath("/apis/"+group))
		return
	}
	writeJSON(w, http.StatusOK, s.apiGroup(group))
}

// serveResourceList answers /api/VERSION and /apis/GROUP/VERSION.
func (s *Server) serveResourceList(w http.ResponseWriter, group, ver string) {
	gv := metav1.GroupVersion{Group: group, Version: ver}
	infos := s.reg.byGV[schema.GroupVersion{Group: group, Version: ver}]
	reviews := s.reg.reviews[schema.GroupVersion{Group: group, Version: ver}]
	if len(infos) == 0 && len(reviews) == 0 {
		writeError(w, notFoundPath("/apis/"+gv.String()))
		return
	}
	list := metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	}
	for _, res := range infos {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.resource, SingularName: res.singular(), Namespaced: res.namespaced,
			Kind: res.kind, Verbs: res.verbs, ShortNames: res.shortNames,
		})
		for _, sub := range res.subresources {
			ar := metav1.APIResource{Name: res.resource + "/" + sub, Namespaced: res.namespaced, Kind: res.kind, Verbs: subresourceVerbs(sub)}
			switch sub {
			case subBinding:
				ar.Kind = "Binding"
			case subEviction:
				ar.Group, ar.Version, ar.Kind = "policy", "v1", "Eviction"
			case subScale:
				ar.Group, ar.Version, ar.Kind = "autoscaling", "v1", "Scale"
			}
			list.APIResources = append(list.APIResources, ar)
		}
	}
	// The reviews as kube-apiserver lists them: cluster-scoped, create only,
	// no short names.
	for _, rev := range reviews {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: rev.resource, SingularName: strings.ToLower(rev.kind), Kind: rev.kind, Verbs: []string{VerbCreate},
		})
	}
	writeJSON(w, http.StatusOK, list)
}

// subresourceVerbs are the verbs a subresource serves (requestVerb maps
// methods onto them).
func subresourceVerbs(sub string) []string {
	switch sub {
	case subStatus, subScale:
		return []string{VerbGet, VerbPatch, VerbUpdate}
	case subFinalize:
		return []string{VerbUpdate}
	case subBinding, subEviction:
		return []string{VerbCreate}
	case subLog:
		return []string{VerbGet}
	case subExec, subAttach, subPortForward:
		// As kube-apiserver lists them; both answer that simulated
		// containers run no processes (handlers_log.go).
		return []string{VerbCreate, VerbGet}
	}
	return nil
}
