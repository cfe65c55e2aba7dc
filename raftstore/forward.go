package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Followers forward writes and linearizable reads to the leader as HTTP/1.1
// POSTs over ForwardListener and Config.Dial. Every reply is 200 with a
// forwardReply; a failure is a code naming a sentinel error, so errors.Is
// works on the follower as on the leader.
const (
	pathWrite = "/raftstore/v1/write"
	pathGet   = "/raftstore/v1/get"
	pathList  = "/raftstore/v1/list"

	// headerTimeout carries the follower's remaining time in milliseconds, so
	// the leader gives up (and answers) before the follower stops listening.
	headerTimeout = "Raftstore-Timeout-Ms"

	maxForwardBody = 64 << 20
)

// Error codes of forwardReply.Code.
const (
	codeNotLeader   = "not_leader" // this member does not lead; nothing was done
	codeNotFound    = "not_found"
	codeExists      = "exists"
	codeConflict    = "conflict"
	codeInvalid     = "invalid"
	codeTooOld      = "too_old"
	codeUnavailable = "unavailable"
	codeTimeout     = "timeout"
	codeClosed      = "closed"
)

// codes maps codes to sentinels, in the order errors are classified.
var codes = []struct {
	code string
	err  error
}{
	{codeNotLeader, errRetry},
	{codeTimeout, ErrTimeout},
	{codeUnavailable, ErrUnavailable},
	{codeNotFound, ErrNotFound},
	{codeExists, ErrExists},
	{codeConflict, ErrConflict},
	{codeInvalid, ErrInvalid},
	{codeTooOld, ErrTooOld},
	{codeClosed, ErrClosed},
}

type getRequest struct {
	Key Key `json:"key"`
}

type listRequest struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	// Index narrows the list (ByIndex) when set.
	Index *string `json:"index,omitempty"`
}

type forwardReply struct {
	Object  *Object  `json:"object,omitempty"`
	Objects []Object `json:"objects,omitempty"`
	Rev     uint64   `json:"rev,omitempty"`
	Code    string   `json:"code,omitempty"`
	Message string   `json:"message,omitempty"`
}

// forwardHandler serves requests forwarded by followers. It only ever acts
// locally: a member that does not lead answers not_leader and never forwards
// again, so requests cannot loop.
func (s *Store) forwardHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathWrite, func(w http.ResponseWriter, r *http.Request) {
		s.serveForward(w, r, func(ctx context.Context, body []byte) (forwardReply, error) {
			var cmd command
			if err := json.Unmarshal(body, &cmd); err != nil {
				return forwardReply{}, fmt.Errorf("%w: decoding forwarded command: %v", ErrInvalid, err)
			}
			obj, err := s.applyLocal(ctx, body)
			return forwardReply{Object: &obj}, err
		})
	})
	mux.HandleFunc("POST "+pathGet, func(w http.ResponseWriter, r *http.Request) {
		s.serveForward(w, r, func(ctx context.Context, body []byte) (forwardReply, error) {
			var req getRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return forwardReply{}, fmt.Errorf("%w: decoding forwarded get: %v", ErrInvalid, err)
			}
			if _, err := s.readIndex(ctx); err != nil {
				return forwardReply{}, err
			}
			obj, err := s.fsm.get(req.Key)
			return forwardReply{Object: &obj}, err
		})
	})
	mux.HandleFunc("POST "+pathList, func(w http.ResponseWriter, r *http.Request) {
		s.serveForward(w, r, func(ctx context.Context, body []byte) (forwardReply, error) {
			var req listRequest
			if err := json.Unmarshal(body, &req); err != nil {
				return forwardReply{}, fmt.Errorf("%w: decoding forwarded list: %v", ErrInvalid, err)
			}
			index, err := s.readIndex(ctx)
			if err != nil {
				return forwardReply{}, err
			}
			var n Narrowing
			if req.Index != nil {
				n = ByIndex(*req.Index)
			}
			objs, rev := s.fsm.listNarrowed(req.Resource, req.Namespace, n)
			return forwardReply{Objects: objs, Rev: max(rev, index)}, nil
		})
	})
	return mux
}

// serveForward runs op on this member if it leads and writes the reply.
func (s *Store) serveForward(w http.ResponseWriter, r *http.Request, op func(context.Context, []byte) (forwardReply, error)) {
	ctx := r.Context()
	if ms, err := strconv.ParseInt(r.Header.Get(headerTimeout), 10, 64); err == nil && ms > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond*9/10)
		defer cancel()
	}
	var reply forwardReply
	body, err := io.ReadAll(io.LimitReader(r.Body, maxForwardBody))
	switch {
	case err != nil:
		// The request never fully arrived, so nothing was done.
		err = fmt.Errorf("%w: reading forwarded request: %v", errRetry, err)
	case s.closed() || !s.IsLeader():
		err = fmt.Errorf("%w: %s does not lead", errRetry, s.cfg.ID)
	default:
		reply, err = op(ctx, body)
	}
	if err != nil {
		reply = forwardReply{Code: codeTimeout, Message: err.Error()}
		for _, c := range codes {
			if errors.Is(err, c.err) {
				reply.Code = c.code
				break
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(reply); err != nil {
		s.log.Debug("writing forward reply", "err", err)
	}
}

// forwardClient sends requests to the leader's ForwardAddr with a small pool
// of keep-alive connections per leader.
type forwardClient struct {
	cfg    Config
	client *http.Client
	hosts  map[string]string // URL host -> ForwardAddr
}

// The URL host of member i: ForwardAddr may be any string the dialer
// understands, so it is not put in URLs.
func memberHost(i int) string { return "member" + strconv.Itoa(i) + ".raftstore" }

// forwardIdleConns is how many idle connections a member keeps to each
// other member for forwarded requests.
const forwardIdleConns = 64

func newForwardClient(cfg Config) *forwardClient {
	c := &forwardClient{cfg: cfg, hosts: map[string]string{}}
	for i, m := range cfg.Members {
		c.hosts[memberHost(i)+":80"] = m.ForwardAddr
	}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, hostport string) (net.Conn, error) {
			addr, ok := c.hosts[hostport]
			if !ok {
				return nil, fmt.Errorf("no member at %s", hostport)
			}
			ctx, cancel := context.WithTimeout(ctx, cfg.ForwardDialTimeout)
			defer cancel()
			return cfg.Dial(ctx, addr)
		},
		// Enough idle connections for the requests a busy follower has in
		// flight at once (an API server with dozens of clients), so they
		// are not dialled and closed again under load.
		MaxIdleConns:        forwardIdleConns * len(cfg.Members),
		MaxIdleConnsPerHost: forwardIdleConns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	c.client = &http.Client{Transport: transport}
	return c
}

func (c *forwardClient) close() { c.client.CloseIdleConnections() }

// write forwards an encoded command to leader.
func (c *forwardClient) write(ctx context.Context, leader string, body []byte) (Object, error) {
	reply, err := c.call(ctx, leader, pathWrite, body)
	if err != nil {
		return Object{}, fmt.Errorf("forwarding write to %s: %w", leader, err)
	}
	if reply.Object == nil {
		return Object{}, fmt.Errorf("forwarding write to %s: %w: reply has no object", leader, ErrTimeout)
	}
	return *reply.Object, nil
}

// get forwards a Get to leader.
func (c *forwardClient) get(ctx context.Context, leader string, key Key) (Object, error) {
	body, _ := json.Marshal(getRequest{Key: key})
	reply, err := c.call(ctx, leader, pathGet, body)
	if err != nil {
		return Object{}, fmt.Errorf("forwarding get to %s: %w", leader, err)
	}
	if reply.Object == nil {
		return Object{}, fmt.Errorf("forwarding get to %s: %w: reply has no object", leader, ErrTimeout)
	}
	return *reply.Object, nil
}

// list forwards a List to leader.
func (c *forwardClient) list(ctx context.Context, leader, resource, namespace string, n Narrowing) ([]Object, uint64, error) {
	req := listRequest{Resource: resource, Namespace: namespace}
	if n.set {
		req.Index = &n.index
	}
	body, _ := json.Marshal(req)
	reply, err := c.call(ctx, leader, pathList, body)
	if err != nil {
		return nil, 0, fmt.Errorf("forwarding list to %s: %w", leader, err)
	}
	if reply.Objects == nil {
		reply.Objects = []Object{}
	}
	return reply.Objects, reply.Rev, nil
}

// call sends one request. A request that was never completely written had no
// effect (errRetry); once written, a lost reply leaves the outcome unknown
// (ErrTimeout). A reply's code becomes its sentinel.
func (c *forwardClient) call(ctx context.Context, leader, path string, body []byte) (forwardReply, error) {
	idx := -1
	for i, m := range c.cfg.Members {
		if m.ID == leader {
			idx = i
		}
	}
	if idx < 0 {
		return forwardReply{}, fmt.Errorf("%w: leader %q is not a member", errRetry, leader)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ForwardTimeout)
	defer cancel()

	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+memberHost(idx)+path, bytes.NewReader(body))
	if err != nil {
		return forwardReply{}, fmt.Errorf("%w: building request: %v", errRetry, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(headerTimeout, strconv.FormatInt(time.Until(dl).Milliseconds(), 10))
	}

	resp, err := c.client.Do(req)
	if err != nil {
		if !wrote.Load() {
			return forwardReply{}, fmt.Errorf("%w: request not sent: %v", errRetry, err)
		}
		return forwardReply{}, fmt.Errorf("%w: reply lost: %v", ErrTimeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return forwardReply{}, fmt.Errorf("%w: leader answered %s", ErrTimeout, resp.Status)
	}
	var reply forwardReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxForwardBody)).Decode(&reply); err != nil {
		return forwardReply{}, fmt.Errorf("%w: reading reply: %v", ErrTimeout, err)
	}
	if reply.Code == "" {
		return reply, nil
	}
	for _, cd := range codes {
		if cd.code == reply.Code {
			// Keep the leader's message, without repeating the sentinel.
			return forwardReply{}, fmt.Errorf("%w%s", cd.err, strings.TrimPrefix(reply.Message, cd.err.Error()))
		}
	}
	return forwardReply{}, fmt.Errorf("%w: unknown reply code %q: %s", ErrTimeout, reply.Code, reply.Message)
}
