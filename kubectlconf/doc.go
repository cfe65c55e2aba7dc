// Package kubectlconf is podsafe's kubectl conformance script: a test that
// drives the embedded cluster as `podsafe cluster up` serves it with kubectl
// itself — k8s.io/kubectl's commands at the release of podsafe's client-go,
// run in process — through what a Kubernetes engineer does first (get with
// kube-apiserver's columns, chunked lists, explain, logs, dry runs, patch
// errors, auth can-i and whoami, impersonation and its refusals, rollout
// status and restart) and asserts what kubectl prints. It is a module of its
// own, as the oracle is, so that podsafe's own module does not depend on
// kubectl.
package kubectlconf
