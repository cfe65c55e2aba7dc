// Package clientconf is podsafe's client conformance test: client-go's
// shared informers and a controller-runtime manager (v0.25, the release of
// podsafe's client-go) run against the embedded cluster's API servers while
// the cluster's leader crashes, members and clients are partitioned and
// components are paused, and at the end every cache, every informer's view
// of its notifications and the manager's work are held to a fresh
// linearizable LIST. It is a module of its own, as kubectlconf is, so that
// podsafe's own module does not depend on controller-runtime.
package clientconf
