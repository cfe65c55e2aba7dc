package binaries

import "errors"

// Sentinel errors. Build and ResolveEtcdVersion wrap them with the version and
// what to do about it; test with errors.Is.
var (
	// ErrBadVersion is a version that is not of the form vMAJOR.MINOR.PATCH.
	ErrBadVersion = errors.New("not a release version")
	// ErrNotServed is a version the Go module proxy does not serve.
	ErrNotServed = errors.New("not served by the Go module proxy")
	// ErrNoEtcdVersion is a Kubernetes release whose build/dependencies.yaml
	// names no etcd version, or names a minor of which no patch is served.
	ErrNoEtcdVersion = errors.New("no etcd version")
)
