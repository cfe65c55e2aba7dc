package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/raftstore"
)

// member is one control-plane member: a raft store and the API server in front
// of it, each listening on the simulated network under the member's host.
type member struct {
	idx  int
	host string
	// life serialises start and stop of this member; c.mu guards the fields
	// other goroutines read (store, api, http).
	life sync.Mutex

	store  *raftstore.Store
	api    *apiserver.Server
	http   *http.Server
	raftLn net.Listener
	fwdLn  net.Listener
	apiLn  net.Listener
	served chan struct{}
	// abandoned are the stores this member crashed, whose raft instances
	// may still be stopping (guarded by life).
	abandoned []*raftstore.Store
}

func (c *Cluster) startMember(m *member) (err error) {
	m.life.Lock()
	defer m.life.Unlock()
	if c.Store(m.idx) != nil {
		return fmt.Errorf("%s: %w", m.host, ErrMemberUp)
	}
	log := c.log.With("component", "member", "member", m.host)
	var lns []net.Listener
	defer func() {
		if err != nil {
			for _, ln := range lns {
				ln.Close()
			}
		}
	}()
	listen := func(port string) (net.Listener, error) {
		ln, err := c.net.Listen(m.host + ":" + port)
		if err == nil {
			lns = append(lns, ln)
		}
		return ln, err
	}
	if m.raftLn, err = listen(RaftPort); err != nil {
		return err
	}
	if m.fwdLn, err = listen(ForwardPort); err != nil {
		return err
	}
	if m.apiLn, err = listen(APIPort); err != nil {
		return err
	}
	scfg := raftstore.Config{
		ID:              m.host,
		Members:         c.raftMembers(),
		Bootstrap:       true,
		RaftListener:    m.raftLn,
		ForwardListener: m.fwdLn,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return c.net.Dial(ctx, m.host, addr)
		},
		Clock:   c.clock,
		Logger:  log.With("component", "raftstore"),
		Indexes: apiserver.StoreIndexes(),
	}
	c.configureRaft(&scfg, m.host)
	if c.cfg.Durable {
		scfg.Durable = true
		scfg.DataDir = memberDataDir(c.cfg.DataDir, m.host)
		if err := ensureDir(scfg.DataDir); err != nil {
			return fmt.Errorf("creating data directory of %s: %w", m.host, err)
		}
	}
	store, err := raftstore.Open(scfg)
	if err != nil {
		return fmt.Errorf("opening store of %s: %w", m.host, err)
	}
	tokens := map[string]string{}
	for id, tok := range c.tokens {
		tokens[tok] = id
	}
	api, err := apiserver.New(apiserver.Config{
		Store:           store,
		Tokens:          tokens,
		Clock:           c.clock,
		Logger:          log.With("component", "apiserver"),
		BypassAuthority: c.cfg.BypassAuthority,
		// kube-apiserver's NamespaceLifecycle admission, on as upstream.
		NamespaceLifecycle: true,
		Logs:               containerLogs{c},
	})
	if err != nil {
		store.Close()
		return fmt.Errorf("building API server of %s: %w", m.host, err)
	}
	srv := httpServer(api, log)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(m.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("API server stopped", "err", err)
		}
	}()
	c.mu.Lock()
	m.store, m.api, m.http, m.served = store, api, srv, served
	store.SetStaleReads(c.started && c.cfg.StaleReads)
	c.mu.Unlock()
	log.Info("member started", "durable", c.cfg.Durable)
	return nil
}

// stopMember stops a member cleanly (raftstore.Store.Close: raft shuts down
// and syncs), as Cluster.Close does, and waits for the raft instances its
// earlier crashes abandoned.
func (c *Cluster) stopMember(m *member) error { return c.haltMember(m, false) }

// haltMember stops a member, cleanly or as a crash (CrashMember:
// raftstore.Store.Crash). Either way its API server's connections are
// dropped first, so that a request in flight ends with an unknown outcome
// rather than an answer from a dying store; a member never leaves the raft
// configuration.
func (c *Cluster) haltMember(m *member, crash bool) error {
	m.life.Lock()
	defer m.life.Unlock()
	c.mu.Lock()
	store, srv, served := m.store, m.http, m.served
	lns := []net.Listener{m.raftLn, m.fwdLn, m.apiLn}
	m.store, m.api, m.http = nil, nil, nil
	c.mu.Unlock()
	if store == nil {
		if !crash {
			m.waitReaped(c)
		}
		return fmt.Errorf("%s: %w", m.host, ErrMemberDown)
	}
	var errs []error
	if err := srv.Close(); err != nil {
		errs = append(errs, err)
	}
	stop, what := store.Close, "closing"
	if crash {
		stop, what = store.Crash, "crashing"
		// Forget the ones reaped: each holds a whole store's state.
		m.abandoned = slices.DeleteFunc(m.abandoned, reaped)
		m.abandoned = append(m.abandoned, store)
	}
	if err := stop(); err != nil && !errors.Is(err, raftstore.ErrClosed) {
		errs = append(errs, fmt.Errorf("%s store of %s: %w", what, m.host, err))
	}
	<-served
	for _, ln := range lns {
		if ln != nil {
			ln.Close() // already closed by the store or server: the error says nothing
		}
	}
	if !crash {
		m.waitReaped(c)
	}
	c.log.Info("member stopped", "member", m.host, "crash", crash)
	return errors.Join(errs...)
}

// reapTimeout bounds how long a cluster closing waits for the abandoned raft
// instances of its crashed members to stop.
const reapTimeout = 10 * time.Second

// waitReaped waits until the raft instances this member abandoned in
// crashes have stopped, so that a closed cluster leaves nothing running.
// Callers hold m.life.
func (m *member) waitReaped(c *Cluster) {
	deadline := time.After(reapTimeout)
	for _, s := range m.abandoned {
		select {
		case <-s.Reaped():
		case <-deadline:
			c.log.Warn("crashed member's raft instance not reaped", "member", m.host, "timeout", reapTimeout)
			return
		}
	}
	m.abandoned = nil
}

func reaped(s *raftstore.Store) bool {
	select {
	case <-s.Reaped():
		return true
	default:
		return false
	}
}

// CrashMember kills member i as a power failure would (see
// raftstore.Store.Crash): its API server and raft member stop at once, with
// no shutdown path; in-flight requests fail with unknown outcomes. With
// durable storage it keeps exactly what it had synced, for RestartMember.
func (c *Cluster) CrashMember(i int) error {
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("%w: no member %d", ErrInvalidTopology, i)
	}
	return c.haltMember(c.members[i], true)
}

// RestartMember starts a crashed member again from its data directory.
func (c *Cluster) RestartMember(i int) error {
	if i < 0 || i >= len(c.members) {
		return fmt.Errorf("%w: no member %d", ErrInvalidTopology, i)
	}
	if !c.cfg.Durable {
		return ErrNotDurable
	}
	return c.startMember(c.members[i])
}

// MemberUp reports whether member i is running.
func (c *Cluster) MemberUp(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].store != nil
}
