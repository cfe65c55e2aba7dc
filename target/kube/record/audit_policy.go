package record

// auditPolicy is the audit policy podsafe runs kube-apiserver with (see
// AuditPolicy). The first rule a request matches decides its level.
const auditPolicy = `# podsafe's audit policy: every request that changes what the checkers
# judge, with its bodies; metadata for the rest. The first matching rule wins.
apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request (two for watches and other long-running requests,
# whose ResponseStarted podsafe records: do not omit that stage).
omitStages: ["RequestReceived"]
# Nothing reads managedFields; they would double the size of every body.
omitManagedFields: true
rules:
# Health probes: constant, and never a Kubernetes API call.
- level: None
  nonResourceURLs: ["/healthz", "/healthz/*", "/readyz", "/readyz/*", "/livez", "/livez/*"]
# Reads of Events: every component watches them.
- level: None
  verbs: ["get", "list", "watch"]
  resources:
  - group: ""
    resources: ["events"]
  - group: events.k8s.io
    resources: ["events"]
# Leases: node heart-beats and leader elections renew them every few
# seconds; the call itself (who, when, its outcome) is all a checker reads
# of them, and the register workload's Leases are recorded by their store
# events and by podsafe's own transport.
- level: Metadata
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
# Lists answer with whole lists; no checker reads a list's body, and a
# watch's stream is never logged.
- level: Metadata
  verbs: ["list", "watch"]
# Writes and reads of what the checkers judge: the request body holds the
# grace period of a deletion, the response the object's uid and
# resourceVersion (and the name of a generated one).
- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods", "pods/binding", "pods/eviction", "pods/status", "nodes", "nodes/status"]
  - group: storage.k8s.io
    resources: ["volumeattachments", "volumeattachments/status"]
  - group: apps
    resources: ["statefulsets", "statefulsets/status", "statefulsets/scale", "replicasets", "replicasets/status", "replicasets/scale"]
  - group: policy
    resources: ["poddisruptionbudgets", "poddisruptionbudgets/status"]
  - group: scheduling.k8s.io
    resources: ["priorityclasses"]
# Everything else: who did what, when, with which outcome.
- level: Metadata
`

// AuditPolicy returns the audit policy (audit.k8s.io/v1 Policy, YAML) to
// run kube-apiserver with (--audit-policy-file):
//
//   - RequestResponse for pods (with pods/binding, pods/eviction and
//     pods/status), nodes (and nodes/status), volumeattachments,
//     statefulsets, replicasets, poddisruptionbudgets and priorityclasses
//     (with their status and scale subresources), except lists and
//     watches: a deletion's DeleteOptions and an eviction's deleteOptions
//     hold the grace period, and the response object the uid and
//     resourceVersion the transport records;
//   - Metadata for coordination.k8s.io Leases: node heart-beats and
//     leader elections renew them every few seconds, so their bodies would
//     dominate the log, and no checker reads a Lease from an API call (the
//     calls still show who renewed when, with what outcome);
//   - Metadata for lists and watches (a list's body is the whole list, and
//     no checker reads a list's resourceVersion from an API call), and for
//     everything else;
//   - None for /healthz, /readyz and /livez, and for get, list and watch
//     of Events (core and events.k8s.io).
//
// It omits the RequestReceived stage and managedFields. The
// ResponseStarted stage must stay: ConvertAudit records watches from it.
func AuditPolicy() []byte { return []byte(auditPolicy) }
