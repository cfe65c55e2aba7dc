package simnet

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// Sentinel errors. Operations wrap them in a *net.OpError, so callers test
// with errors.Is. Connections also fail with the errno a TCP stack would use:
// syscall.ECONNREFUSED, ECONNRESET, ETIMEDOUT (after a cut outlasts the
// detection timeout; Timeout reports true) and EPIPE.
var (
	// ErrBadAddress reports an address that is not "host:port" with a non-empty
	// host and a numeric port.
	ErrBadAddress = errors.New("want host:port with a non-empty host and a numeric port")
	// ErrAddressInUse reports a Listen on an address that already has a listener.
	ErrAddressInUse = errors.New("address already in use")
	// ErrNetworkClosed reports an operation on, or a connection cut by, a closed
	// Network. It matches net.ErrClosed.
	ErrNetworkClosed = fmt.Errorf("simulated network closed: %w", net.ErrClosed)
)

// The errors connections fail with, chosen to match what a real TCP stack
// reports so that retry logic written for TCP behaves the same here:
//   - errRefused: a dial to an address nobody listens on;
//   - errTimedOut: a connection cut for longer than the detection timeout (its
//     Timeout method reports true, like a keep-alive failure);
//   - errReset: a write to a peer that has closed, or a queued connection whose
//     listener closed before accepting it;
//   - errPipe: a write after CloseWrite.
var (
	errRefused  error = syscall.ECONNREFUSED
	errTimedOut error = syscall.ETIMEDOUT
	errReset    error = syscall.ECONNRESET
	errPipe     error = syscall.EPIPE
)
