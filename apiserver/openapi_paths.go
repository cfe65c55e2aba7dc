package apiserver

import (
	"fmt"
	"reflect"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// apiOperation is one operation of the documents, in terms both the v2 and
// the v3 document render: what kube-apiserver's installer says of the
// same route.
type apiOperation struct {
	path, method string
	// action is x-kubernetes-action: get, list, watch, watchlist, post,
	// put, patch, delete, deletecollection, connect.
	action      string
	id          string
	description string
	// gvk is the operation's x-kubernetes-group-version-kind.
	gvk schema.GroupVersionKind
	// body is the request body's type, nil for none; patch says it is a
	// patch (any of the patch media types) of it.
	body  reflect.Type
	patch bool
	// response is the 200 answer's type; created adds 201 (and 202 for
	// create) with it.
	response reflect.Type
	created  bool
	// text says the answer is text/plain (pods/log).
	text   bool
	params []queryParam
}

// queryParam is a query parameter; typ is its JSON schema type.
type queryParam struct {
	name, typ, description string
}

// The query parameters the server reads, by what they are for.
var (
	paramFieldValidation = queryParam{"fieldValidation", "string",
		"fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"}
	paramFieldManager = queryParam{"fieldManager", "string",
		"fieldManager is a name associated with the actor or entity that is making these changes."}
	paramDryRun = queryParam{"dryRun", "string",
		"When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed"}
	paramForce = queryParam{"force", "boolean",
		"Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people."}
	listParams = []queryParam{
		{"allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."},
		{"continue", "string", "The continue option should be set when retrieving more results from the server."},
		{"fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."},
		{"labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."},
		{"limit", "integer", "limit is a maximum number of responses to return for a list call."},
		{"resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."},
		{"resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."},
		{"sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic ADDED events of the current state."},
		{"timeoutSeconds", "integer", "Timeout for the list/watch call."},
		{"watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."},
	}
	writeParams  = []queryParam{paramDryRun, paramFieldManager, paramFieldValidation}
	patchParams  = []queryParam{paramDryRun, paramFieldManager, paramFieldValidation, paramForce}
	deleteParams = []queryParam{
		paramDryRun,
		{"gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."},
		{"propagationPolicy", "string", "Whether and how garbage collection will be performed."},
	}
	logParams = []queryParam{
		{"container", "string", "The container for which to stream logs."},
		{"follow", "boolean", "Follow the log stream of the pod."},
		{"sinceSeconds", "integer", "A relative time in seconds before the current time from which to show logs."},
		{"sinceTime", "string", "An RFC3339 timestamp from which to show logs."},
	}
)

// Go types the operations refer to.
var (
	typeDeleteOptions = reflect.TypeFor[metav1.DeleteOptions]()
	typeStatus        = reflect.TypeFor[metav1.Status]()
	typeWatchEvent    = reflect.TypeFor[metav1.WatchEvent]()
)

// operationPrefix is the group-version part of an operation id:
// CoreV1, AppsV1, CoordinationV1, ...
func operationPrefix(gv schema.GroupVersion) string {
	group, _, _ := strings.Cut(gv.Group, ".")
	if group == "" {
		group = "core"
	}
	return upperFirst(group) + upperFirst(gv.Version)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// resourceOperations lists the operations kube-apiserver would document for
// res: the collection (list, create, delete collection, and list across
// namespaces), the object (read, replace, patch, delete), the watches and
// the subresources the registry serves.
func resourceOperations(res *resourceInfo) []apiOperation {
	gv := res.gvk.GroupVersion()
	root := "/" + gvPath(gv)
	kind, pre := res.kind, operationPrefix(gv)
	objType := typeOfKind(res.gvk)
	listType := typeOfKind(res.listGVK)
	collection, scope := root+"/"+res.resource, ""
	watchCollection := root + "/watch/" + res.resource
	if res.namespaced {
		collection = root + "/namespaces/{namespace}/" + res.resource
		watchCollection = root + "/watch/namespaces/{namespace}/" + res.resource
		scope = "Namespaced"
	}
	object, watchObject := collection+"/{name}", watchCollection+"/{name}"
	deleteCollectionParams := append(append([]queryParam{}, listParams...), deleteParams...)
	ops := []apiOperation{
		{path: collection, method: "get", action: "list", id: "list" + pre + scope + kind, gvk: res.gvk,
			description: "list or watch objects of kind " + kind, response: listType, params: listParams},
		{path: collection, method: "post", action: "post", id: "create" + pre + scope + kind, gvk: res.gvk,
			description: "create " + aOrAn(kind), body: objType, response: objType, created: true, params: writeParams},
		{path: collection, method: "delete", action: "deletecollection", id: "delete" + pre + "Collection" + scope + kind, gvk: res.gvk,
			description: "delete collection of " + kind, body: typeDeleteOptions, response: typeStatus, params: deleteCollectionParams},
		{path: object, method: "get", action: "get", id: "read" + pre + scope + kind, gvk: res.gvk,
			description: "read the specified " + kind, response: objType},
		{path: object, method: "put", action: "put", id: "replace" + pre + scope + kind, gvk: res.gvk,
			description: "replace the specified " + kind, body: objType, response: objType, created: true, params: writeParams},
		{path: object, method: "patch", action: "patch", id: "patch" + pre + scope + kind, gvk: res.gvk,
			description: "partially update the specified " + kind, body: objType, patch: true, response: objType, created: true, params: patchParams},
		{path: object, method: "delete", action: "delete", id: "delete" + pre + scope + kind, gvk: res.gvk,
			description: "delete " + aOrAn(kind), body: typeDeleteOptions, response: objType, params: deleteParams},
		{path: watchCollection, method: "get", action: "watchlist", id: "watch" + pre + scope + kind + "List", gvk: res.gvk,
			description: "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead.",
			response:    typeWatchEvent, params: listParams},
		{path: watchObject, method: "get", action: "watch", id: "watch" + pre + scope + kind, gvk: res.gvk,
			description: "watch changes to an object of kind " + kind + ". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.",
			response:    typeWatchEvent, params: listParams},
	}
	if res.namespaced {
		all := root + "/" + res.resource
		ops = append(ops,
			apiOperation{path: all, method: "get", action: "list", id: "list" + pre + kind + "ForAllNamespaces", gvk: res.gvk,
				description: "list or watch objects of kind " + kind, response: listType, params: listParams},
			apiOperation{path: root + "/watch/" + res.resource, method: "get", action: "watchlist", id: "watch" + pre + kind + "ListForAllNamespaces", gvk: res.gvk,
				description: "watch individual changes to a list of " + kind + ". deprecated: use the 'watch' parameter with a list operation instead.",
				response:    typeWatchEvent, params: listParams})
	}
	for _, sub := range res.subresources {
		path := object + "/" + sub
		switch sub {
		case "status", "scale":
			gvk, typ, suffix := res.gvk, objType, "Status"
			if sub == "scale" {
				gvk, typ, suffix = autoscalingv1.SchemeGroupVersion.WithKind("Scale"), reflect.TypeFor[autoscalingv1.Scale](), "Scale"
			}
			ops = append(ops,
				apiOperation{path: path, method: "get", action: "get", id: "read" + pre + scope + kind + suffix, gvk: gvk,
					description: "read " + sub + " of the specified " + kind, response: typ},
				apiOperation{path: path, method: "put", action: "put", id: "replace" + pre + scope + kind + suffix, gvk: gvk,
					description: "replace " + sub + " of the specified " + kind, body: typ, response: typ, created: true, params: writeParams},
				apiOperation{path: path, method: "patch", action: "patch", id: "patch" + pre + scope + kind + suffix, gvk: gvk,
					description: "partially update " + sub + " of the specified " + kind, body: typ, patch: true, response: typ, created: true, params: patchParams})
		case "binding", "eviction":
			gvk, typ := corev1.SchemeGroupVersion.WithKind("Binding"), reflect.TypeFor[corev1.Binding]()
			if sub == "eviction" {
				gvk, typ = policyv1.SchemeGroupVersion.WithKind("Eviction"), reflect.TypeFor[policyv1.Eviction]()
			}
			ops = append(ops, apiOperation{path: path, method: "post", action: "post", id: "create" + pre + scope + kind + upperFirst(sub), gvk: gvk,
				description: "create " + sub + " of " + aOrAn(kind), body: typ, response: typ, created: true, params: writeParams})
		case "log":
			ops = append(ops, apiOperation{path: path, method: "get", action: "get", id: "read" + pre + scope + kind + "Log", gvk: res.gvk,
				description: "read log of the specified " + kind, text: true, params: logParams})
		case "exec", "attach", "portforward":
			opts := map[string]string{"exec": "PodExecOptions", "attach": "PodAttachOptions", "portforward": "PodPortForwardOptions"}[sub]
			for _, method := range []string{"get", "post"} {
				ops = append(ops, apiOperation{path: path, method: method, action: "connect",
					id:  "connect" + upperFirst(method) + pre + scope + kind + map[string]string{"exec": "Exec", "attach": "Attach", "portforward": "Portforward"}[sub],
					gvk: gv.WithKind(opts), description: "connect " + strings.ToUpper(method) + " requests to " + sub + " of " + kind, text: true})
			}
		}
	}
	return ops
}

// reviewOperations is the one operation of a create-only review.
func reviewOperations(rev *reviewSpec) []apiOperation {
	gv := schema.GroupVersion{Group: rev.group, Version: rev.version}
	typ := typeOfKind(gv.WithKind(rev.kind))
	return []apiOperation{{path: "/" + gvPath(gv) + "/" + rev.resource, method: "post", action: "post",
		id: "create" + operationPrefix(gv) + rev.kind, gvk: gv.WithKind(rev.kind),
		description: "create " + aOrAn(rev.kind), body: typ, response: typ, created: true, params: writeParams}}
}

// typeOfKind is the Go type of a kind of the scheme.
func typeOfKind(gvk schema.GroupVersionKind) reflect.Type {
	obj, err := apiScheme.New(gvk)
	if err != nil {
		// The registry checked every kind it serves against the scheme.
		panic(fmt.Sprintf("apiserver: %v", err))
	}
	return reflect.TypeOf(obj).Elem()
}

// aOrAn is kind with its article, as upstream's descriptions say it.
func aOrAn(kind string) string {
	if strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
