// Package apiserver serves a raftstore over the Kubernetes REST protocol, so
// that components written with client-go (clientsets, informers) and kubectl
// work against it unchanged, and it enforces the pod-safety rules of
// GUARANTEES.md that belong to the API: graceful deletion (GP-6, PS-3) and
// who may force delete, bind, and write pod and node status (PS-8, PS-9,
// PS-10, PS-13, PS-14, LC-2, LC-3).
//
// A Server is an http.Handler over one Store (one raftstore member):
//
//	srv, err := apiserver.New(apiserver.Config{
//		Store:  member,
//		Tokens: map[string]string{"s3cret": apiserver.IdentityAdmin, "n1": apiserver.KubeletIdentity("node-1")},
//		Clock:  scaledClock,
//	})
//	go http.Serve(listener, srv)
//	defer srv.Close() // ends open watches
//
// Clients authenticate with a bearer token (rest.Config.BearerToken); the
// identity it maps to decides what they may do (authority.go). Kubeconfig
// based clients such as kubectl send tokens only over HTTPS.
//
// What is served: the resources of the registry table (registry.go) with
// get, list, watch, create, update, patch (merge, JSON and strategic merge),
// delete and deletecollection; the status, binding, eviction and scale
// subresources; legacy discovery (clients asking for aggregated discovery get
// the legacy documents and fall back); a minimal OpenAPI v3 that tells
// kubectl the server validates fields itself; /version, /healthz, /readyz,
// /livez.
// Request bodies may be JSON, YAML or protobuf (client-go's default);
// answers are always JSON.
//
// Watches serve client-go's watch-list protocol (sendInitialEvents=true), so
// informers sync from one stream with the WatchListClient gate at its
// default; LIST then WATCH works as well. Too old resourceVersions get an
// HTTP 410 (reason Expired) and reflectors relist.
//
// Served as kube-apiserver serves them: Table output (table*.go), list
// paging with continue tokens (paginate.go), OpenAPI v2 and v3 with the
// served types' schemas (openapi*.go), impersonation and the self reviews
// (impersonate.go, review*.go), server-side dry run (dryrun.go), pods/log
// (handlers_log.go), server-side apply with managed fields on every write
// (apply.go, managedfields.go), namespace lifecycle and NamespaceLifecycle
// admission (namespace_*.go), deletion propagation by finalizers
// (gc_finalizers.go; the garbage collector itself is a controller), apps/v1
// Deployments (*deployment.go). Not served: CBOR apply (415), exec, attach
// and port-forward (405: simulated containers run no processes).
package apiserver
