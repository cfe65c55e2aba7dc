package kube

// auditPolicy is the API servers' audit policy: the requests that change
// pods, nodes and what the checkers read, with their bodies; metadata for
// the rest.
func auditPolicy() []byte {
	return []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*", "/version", "/metrics"]
- level: None
  verbs: ["get", "list", "watch"]
- level: Metadata
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods", "pods/binding", "pods/eviction", "pods/status", "nodes", "nodes/status"]
  - group: apps
    resources: ["statefulsets", "replicasets"]
  - group: policy
    resources: ["poddisruptionbudgets"]
  - group: storage.k8s.io
    resources: ["volumeattachments"]
- level: Metadata
`)
}
