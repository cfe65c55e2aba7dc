// Package storage is the in-process cluster's shared storage server: an
// NFS-like network service holding RWO volumes, with no locking of its own.
// It accepts any write from anyone who can reach it, exactly like storage
// that relies on the control plane for exclusivity (PS-15), except from a
// node fenced at the storage (the storage firewall of PS-14). Every write it
// receives is recorded in the ledger, accepted or refused, with the writer's
// node, pod UID and attachment token: the ground truth the storage
// exclusivity checker judges.
//
// The wire protocol is HTTP/JSON over the cluster's simulated network:
//
//	POST /v1/write     kubelet.StorageWrite -> 204 accepted | 403 refused (fenced)
//	                   | 409 refused (stale fencing token, with CompareTokens)
//	POST /v1/fence     {"node": N, "token": T} -> 204; the node is refused from now on
//	POST /v1/unfence   {"node": N} -> 204
//	GET  /v1/fences    -> {"node": token, ...}
//
// The writer's node is the host the connection comes from, not what the
// body claims, so a node cannot write in another's name.
package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/kubelet"
)

// Errors of the storage client.
var (
	// ErrFenced: the server refused the write because the node is fenced.
	ErrFenced = errors.New("storage refused the write: node is fenced")
	// ErrBadRequest: the server could not understand the request.
	ErrBadRequest = errors.New("storage: bad request")
	// ErrStaleToken: the server compares fencing tokens and refused the
	// write because its token is below one it already accepted for the
	// volume.
	ErrStaleToken = errors.New("storage refused the write: stale fencing token")
)

// Fence is a node fenced at the storage, with the fence token it was fenced
// under.
type Fence struct {
	Node  string `json:"node"`
	Token int64  `json:"token"`
}

// Server is the storage server. Safe for concurrent use.
type Server struct {
	ledger kubelet.Ledger
	clock  clock.Clock

	// NodeOf, when set before Serve, names the node a connection's host
	// is (a network whose hosts are addresses, not names); a host it does
	// not know is recorded as it is.
	NodeOf func(host string) (node string, ok bool)

	mu     sync.Mutex
	fenced map[string]int64 // node -> fence token
	writes map[string]int64 // volume -> writes accepted
	// compare: the server compares fencing tokens (CompareTokens); tokens
	// holds each volume's highest accepted token.
	compare bool
	tokens  map[string]int64
}

// NewServer returns a server recording into ledger (nil: discard) with
// times on clk (nil: the real clock).
func NewServer(ledger kubelet.Ledger, clk clock.Clock) *Server {
	if ledger == nil {
		ledger = kubelet.LedgerFunc(func(kubelet.LedgerEntry) {})
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Server{ledger: ledger, clock: clk, fenced: map[string]int64{}, writes: map[string]int64{}, tokens: map[string]int64{}}
}

// CompareTokens makes the server a fenced storage, as storage that takes
// fencing tokens is: it remembers the highest attachment token it accepted
// for each volume and refuses a write whose token is lower (recorded as
// write-stale, answered 409), so a pod whose attachment was superseded
// cannot write after its successor did, even when the control plane or
// the network let it run. Off (the default), the server accepts any write
// of a node that is not fenced, as storage relying on the control plane
// for exclusivity does (PS-15). Set it before the first write.
func (s *Server) CompareTokens(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compare = on
}

// Serve answers requests on l until l is closed.
func (s *Server) Serve(l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/write", s.serveWrite)
	mux.HandleFunc("POST /v1/fence", s.serveFence)
	mux.HandleFunc("POST /v1/unfence", s.serveUnfence)
	mux.HandleFunc("GET /v1/fences", s.serveFences)
	return mux
}

// remoteHost is the host a request came from.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request) {
	var wr kubelet.StorageWrite
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&wr); err != nil || wr.Volume == "" {
		http.Error(w, "a write is a JSON kubelet.StorageWrite with a volume", http.StatusBadRequest)
		return
	}
	wr.Node = remoteHost(r)
	if s.NodeOf != nil {
		if node, ok := s.NodeOf(wr.Node); ok {
			wr.Node = node
		}
	}
	switch action, highest := s.write(wr); action {
	case kubelet.ActionWriteRefused:
		http.Error(w, fmt.Sprintf("node %s is fenced", wr.Node), http.StatusForbidden)
	case kubelet.ActionWriteStale:
		http.Error(w, fmt.Sprintf("volume %s: token %d is below token %d, which the storage already accepted", wr.Volume, wr.Token, highest),
			http.StatusConflict)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// Write applies one write as received from wr.Node, records it and reports
// whether it was accepted. The decision and the ledger entry happen under
// one lock, so the ledger's order of writes is the order the storage applied
// them, and no write is accepted after a fence returned.
func (s *Server) Write(wr kubelet.StorageWrite) bool {
	action, _ := s.write(wr)
	return action == kubelet.ActionWrite
}

// write is Write, returning the action recorded and, for a stale write,
// the volume's highest accepted token.
func (s *Server) write(wr kubelet.StorageWrite) (kubelet.LedgerAction, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, fenced := s.fenced[wr.Node]
	// Failpoint acceptFencedWrites is a PLANTED BUG for the bug zoo, inert
	// unless a scenario switches it on: the server forgets its fences and
	// accepts the writes of a fenced node, so a pet cut off from the control
	// plane keeps writing the volume its replacement now writes (breaks
	// PS-15, PS-14).
	failpoint.InjectContext(failpoints, "acceptFencedWrites", func() { fenced = false })
	highest, seen := s.tokens[wr.Volume]
	stale := s.compare && seen && wr.Token < highest
	// Failpoint acceptStaleTokens is a PLANTED BUG for the bug zoo, inert
	// unless a scenario switches it on: a server that compares fencing
	// tokens forgets to, and accepts a superseded attachment's writes after
	// its successor's (breaks PS-15 on a storage that claims to compare).
	failpoint.InjectContext(failpoints, "acceptStaleTokens", func() { stale = false })
	action := kubelet.ActionWrite
	switch {
	case fenced:
		action = kubelet.ActionWriteRefused
	case stale:
		action = kubelet.ActionWriteStale
	default:
		s.writes[wr.Volume]++
		if !seen || wr.Token > highest {
			s.tokens[wr.Volume] = wr.Token
		}
	}
	s.ledger.Record(kubelet.LedgerEntry{
		Node: wr.Node, Namespace: wr.Namespace, Pod: wr.Pod, UID: wr.UID, Container: wr.Container,
		Action: action, Scaled: s.clock.Now(), Wall: time.Now(), Volume: wr.Volume, Token: wr.Token,
	})
	return action, highest
}

func (s *Server) serveFence(w http.ResponseWriter, r *http.Request) {
	var f Fence
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil || f.Node == "" {
		http.Error(w, `a fence is {"node": NAME, "token": N}`, http.StatusBadRequest)
		return
	}
	s.Fence(f.Node, f.Token)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveUnfence(w http.ResponseWriter, r *http.Request) {
	var f Fence
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil || f.Node == "" {
		http.Error(w, `an unfence is {"node": NAME}`, http.StatusBadRequest)
		return
	}
	s.Unfence(f.Node)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) serveFences(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Fences())
}

// Fence refuses every write from node from now on. A later fence of the same
// node keeps the larger token.
func (s *Server) Fence(node string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.fenced[node]; !ok || token > old {
		s.fenced[node] = token
	}
}

// Unfence accepts node's writes again (an admin action).
func (s *Server) Unfence(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fenced, node)
}

// Fences returns the fenced nodes with their tokens.
func (s *Server) Fences() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.fenced))
	for n, t := range s.fenced {
		out[n] = t
	}
	return out
}

// Writes returns how many writes to volume were accepted.
func (s *Server) Writes(volume string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[volume]
}

// Client talks to a storage server over HTTP. It implements kubelet.Storage.
type Client struct {
	// BaseURL is the server's URL, such as "http://storage:2049".
	BaseURL string
	// HTTP sends the requests; its transport decides where they come from
	// (the cluster dials from the node's host).
	HTTP *http.Client
}

var _ kubelet.Storage = (*Client)(nil)

// Write implements kubelet.Storage.
func (c *Client) Write(ctx context.Context, w kubelet.StorageWrite) error {
	return c.post(ctx, "/v1/write", w)
}

// Fence asks the server to refuse node's writes, under token.
func (c *Client) Fence(ctx context.Context, node string, token int64) error {
	return c.post(ctx, "/v1/fence", Fence{Node: node, Token: token})
}

// Unfence asks the server to accept node's writes again.
func (c *Client) Unfence(ctx context.Context, node string) error {
	return c.post(ctx, "/v1/unfence", Fence{Node: node})
}

func (c *Client) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytesReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("storage %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w (%s)", ErrFenced, trim(msg))
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w (%s)", ErrStaleToken, trim(msg))
	case resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("%w: %s", ErrBadRequest, trim(msg))
	}
	return fmt.Errorf("storage %s: HTTP %d: %s", path, resp.StatusCode, trim(msg))
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func trim(b []byte) string { return strings.TrimSpace(string(b)) }
