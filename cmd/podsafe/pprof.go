package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// pprofEnv names the environment variable that serves Go's profiles
// (/debug/pprof/) of a running podsafe on the address it holds, as etcd's
// --enable-pprof does: PODSAFE_PPROF=localhost:6060 podsafe test ... and
// then go tool pprof http://localhost:6060/debug/pprof/profile. A large run
// (make scale) is where one wants to see where the time goes.
const pprofEnv = "PODSAFE_PPROF"

// servePprof starts the profile server when PODSAFE_PPROF is set; a bad
// address is one line on stderr and the run goes on without it.
func servePprof() {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "podsafe: %s=%s: not serving profiles: %v\n", pprofEnv, addr, err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Fprintf(os.Stderr, "podsafe: serving profiles on http://%s/debug/pprof/\n", ln.Addr())
	go http.Serve(ln, mux) //nolint:errcheck // ends with the process
}
