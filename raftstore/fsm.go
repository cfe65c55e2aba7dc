package raftstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/raft"
	"github.com/pingcap/failpoint"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// opCode names a write command.
type opCode string

// The write commands. Everything a write needs that is not deterministic
// (uid, creationTimestamp) is decided before proposing and is part of Data.
const (
	opCreate opCode = "create"
	opUpdate opCode = "update"
	opDelete opCode = "delete"
)

// command is one raft log entry, encoded as JSON.
type command struct {
	Op   opCode          `json:"op"`
	Key  Key             `json:"key"`
	Data json.RawMessage `json:"data,omitempty"`
	Pre  Preconditions   `json:"pre,omitzero"`
}

// decodeCommand decodes an encoded command as json.Unmarshal does. The
// layout encoding/json writes a command in (Store.write) is read in one pass
// that validates as it goes; anything else is left to json.Unmarshal.
func decodeCommand(b []byte) (command, error) {
	if cmd, ok := scanCommand(b); ok {
		return cmd, nil
	}
	var cmd command
	err := json.Unmarshal(b, &cmd)
	return cmd, err
}

// scanCommand is decodeCommand's one pass. cmd.Data points into b.
func scanCommand(b []byte) (cmd command, ok bool) {
	var buf [4]jsonMember
	ms, ok := scanObject(b, buf[:0])
	if !ok || !sortMembers(ms) {
		return command{}, false
	}
	for _, m := range ms {
		switch string(m.key) {
		case "op":
			op, ok := plainString(m.val)
			if !ok {
				return command{}, false
			}
			cmd.Op = opCode(op)
		case "key":
			var kbuf [3]jsonMember
			km, ok := scanObject(m.val, kbuf[:0])
			if !ok || !sortMembers(km) {
				return command{}, false
			}
			for _, k := range km {
				v, ok := plainString(k.val)
				if !ok {
					return command{}, false
				}
				switch string(k.key) {
				case "resource":
					cmd.Key.Resource = v
				case "namespace":
					cmd.Key.Namespace = v
				case "name":
					cmd.Key.Name = v
				default:
					return command{}, false
				}
			}
		case "data":
			cmd.Data = m.val
		case "pre":
			var pbuf [2]jsonMember
			pm, ok := scanObject(m.val, pbuf[:0])
			if !ok || !sortMembers(pm) {
				return command{}, false
			}
			for _, p := range pm {
				switch string(p.key) {
				case "resourceVersion":
					rv, err := strconv.ParseUint(string(p.val), 10, 64)
					if err != nil {
						return command{}, false
					}
					cmd.Pre.ResourceVersion = rv
				case "uid":
					if cmd.Pre.UID, ok = plainString(p.val); !ok {
						return command{}, false
					}
				default:
					return command{}, false
				}
			}
		default:
			return command{}, false
		}
	}
	return cmd, true
}

// plainString returns the content of a raw JSON string that has no escapes
// and is valid UTF-8: what json.Unmarshal decodes it to.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// applyResult is what fsm.Apply returns for a command: the written (or
// deleted) object, or a sentinel error that is the command's definite,
// deterministic outcome.
type applyResult struct {
	obj Object
	err error
}

// stored is one object in the FSM. data already carries
// metadata.resourceVersion = rv; entries are never mutated, only replaced, so
// they can be shared with snapshots, readers and watch events.
type stored struct {
	data []byte
	rv   uint64
	uid  string
}

// fsm is the replicated state machine: every object by resource and key, the
// index of the last applied command, and the watch hub fed in apply order.
// Apply is deterministic: no clocks, randomness or map-order dependence.
type fsm struct {
	mu      sync.RWMutex
	objects map[string]map[Key]stored // resource -> key -> object
	applied uint64
	// waiters wait for applied to reach an index (see waitApplied): one
	// channel per awaited index, shared by every read waiting for it (reads
	// started together wait for the same commit index), and the lowest
	// awaited index, so applying a command costs nothing while no read
	// waits for it. Guarded by mu.
	waiters   map[uint64]chan struct{}
	minWaiter uint64
	hub       *hub
	log       *slog.Logger
	// delay is an injected fault (SetApplyDelay): every command waits this
	// long before it is applied, as on a member whose disk or CPU is slow.
	delay atomic.Int64
	snaps snapCounters // snapshots taken, installed and restored (snapstats.go)
	// fp is the context the failpoint markers see: the member's identity
	// (fpctx), given by Open (nameFailpoints).
	fp context.Context
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(h *hub, log *slog.Logger) *fsm {
	return &fsm{objects: map[string]map[Key]stored{}, hub: h, log: log, fp: fpctx.For(fpctx.Unnamed)}
}

// Apply applies one committed command. It is called by raft on one goroutine,
// in log order, on every member.
func (f *fsm) Apply(l *raft.Log) any {
	// Failpoint applyDelay: slow the state machine (a member that lags;
	// aimed at one member, only that one).
	failpoint.InjectContext(f.fp, "applyDelay", func() {})
	if d := time.Duration(f.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		f.mu.Lock()
		f.setAppliedLocked(l.Index)
		f.mu.Unlock()
		f.log.Error("undecodable raft command", "index", l.Index, "err", err)
		return applyResult{err: fmt.Errorf("%w: undecodable command at index %d", ErrInvalid, l.Index)}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.setAppliedLocked(l.Index)
	ev, err := f.applyLocked(cmd, l.Index)
	if err != nil {
		return applyResult{err: err}
	}
	f.hub.publish(ev)
	return applyResult{obj: ev.Object}
}

// applyLocked applies cmd at index and returns the event it caused.
func (f *fsm) applyLocked(cmd command, index uint64) (Event, error) {
	old, exists := f.objects[cmd.Key.Resource][cmd.Key]
	switch cmd.Op {
	case opCreate:
		if exists {
			return Event{}, ErrExists
		}
		data, uid, err := createdDoc(cmd.Key, cmd.Data, index)
		if err != nil {
			return Event{}, err
		}
		return Event{Type: Added, Object: f.put(cmd.Key, data, uid, index)}, nil

	case opUpdate:
		if !exists {
			return Event{}, ErrNotFound
		}
		if err := checkPreconditions(old, cmd.Pre); err != nil {
			return Event{}, err
		}
		data, uid, err := updatedDoc(cmd.Key, old.data, cmd.Data, index)
		if err != nil {
			return Event{}, err
		}
		return Event{Type: Modified, Object: f.put(cmd.Key, data, uid, index)}, nil

	case opDelete:
		if !exists {
			return Event{}, ErrNotFound
		}
		if err := checkPreconditions(old, cmd.Pre); err != nil {
			return Event{}, err
		}
		delete(f.objects[cmd.Key.Resource], cmd.Key)
		if len(f.objects[cmd.Key.Resource]) == 0 {
			delete(f.objects, cmd.Key.Resource)
		}
		obj := Object{Key: cmd.Key, Data: withResourceVersion(old.data, index), RV: index}
		return Event{Type: Deleted, Object: obj}, nil
	}
	return Event{}, fmt.Errorf("%w: unknown command %q", ErrInvalid, cmd.Op)
}

// put stores data (the object's stored form, see createdDoc) under key at
// index.
func (f *fsm) put(key Key, data []byte, uid string, index uint64) Object {
	byKey := f.objects[key.Resource]
	if byKey == nil {
		byKey = map[Key]stored{}
		f.objects[key.Resource] = byKey
	}
	byKey[key] = stored{data: data, rv: index, uid: uid}
	return Object{Key: key, Data: data, RV: index}
}

// checkPreconditions returns ErrConflict if pre does not hold for cur.
func checkPreconditions(cur stored, pre Preconditions) error {
	if pre.ResourceVersion != 0 && pre.ResourceVersion != cur.rv {
		return fmt.Errorf("%w: resourceVersion is %d, precondition %d", ErrConflict, cur.rv, pre.ResourceVersion)
	}
	if pre.UID != "" && pre.UID != cur.uid {
		return fmt.Errorf("%w: uid is %q, precondition %q", ErrConflict, cur.uid, pre.UID)
	}
	return nil
}

// get reads one object from local state.
func (f *fsm) get(key Key) (Object, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s, ok := f.objects[key.Resource][key]
	if !ok {
		return Object{}, ErrNotFound
	}
	return Object{Key: key, Data: s.data, RV: s.rv}, nil
}

// list reads the objects of resource (in namespace, or all namespaces when it
// is empty) from local state, sorted by key, with the applied index they
// reflect.
func (f *fsm) list(resource, namespace string) ([]Object, uint64) {
	f.mu.RLock()
	objs := make([]Object, 0, len(f.objects[resource]))
	for k, s := range f.objects[resource] {
		if namespace == "" || k.Namespace == namespace {
			objs = append(objs, Object{Key: k, Data: s.data, RV: s.rv})
		}
	}
	rev := f.applied
	f.mu.RUnlock()
	slices.SortFunc(objs, func(a, b Object) int { return compareKeys(a.Key, b.Key) })
	return objs, rev
}

// setAppliedLocked records that index is applied and releases the waiters it
// satisfies. f.mu must be held for writing.
func (f *fsm) setAppliedLocked(index uint64) {
	f.applied = index
	if len(f.waiters) == 0 || index < f.minWaiter {
		return
	}
	f.minWaiter = 0
	for i, done := range f.waiters {
		switch {
		case i <= index:
			close(done)
			delete(f.waiters, i)
		case f.minWaiter == 0 || i < f.minWaiter:
			f.minWaiter = i
		}
	}
}

// appliedChan returns a channel that is closed once the state machine has
// applied index, and the index applied now; the channel is nil when index is
// applied already.
func (f *fsm) appliedChan(index uint64) (<-chan struct{}, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.applied >= index {
		return nil, f.applied
	}
	done, ok := f.waiters[index]
	if !ok {
		if f.waiters == nil {
			f.waiters = map[uint64]chan struct{}{}
		}
		done = make(chan struct{})
		f.waiters[index] = done
		if f.minWaiter == 0 || index < f.minWaiter {
			f.minWaiter = index
		}
	}
	return done, f.applied
}

// appliedIndex returns the index of the last applied command.
func (f *fsm) appliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// count returns the number of stored objects.
func (f *fsm) count() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := 0
	for _, byKey := range f.objects {
		n += len(byKey)
	}
	return n
}

// compareKeys orders keys by resource, namespace, name: the order of
// Key.String for valid Kubernetes names.
func compareKeys(a, b Key) int {
	return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
