// Package record turns what a real Kubernetes control plane emits into
// podsafe history records, so that histories of the kube target hold the
// same lines the checkers read from the embedded cluster's.
//
// Two sources are read:
//
//   - the API servers' audit logs (audit.k8s.io/v1 events, one JSON object
//     a line): each request's final audit event becomes a history.APICall,
//     shaped as podsafe's recording transport (history.WrapTransport)
//     records the same request, with the real user mapped to a podsafe
//     identity (IdentityMap). AuditPolicy is the policy to run the API
//     servers with; AuditTailer follows the log files while they grow.
//   - a list and watch of a resource through the API (FollowResource):
//     every committed change becomes a history.StoreEvent, as the embedded
//     cluster's recorder writes them from its store, with the same
//     history.LogStoreEventsLost and history.LogStoreEventsEnd notes.
//
// Conversions are pure functions; only AuditTailer and FollowResource do
// I/O, and neither panics on bad input: what cannot be read is noted in
// the history as a log line and the rest goes on.
package record
