package checker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

const (
	wNS  = "podsafe-register"
	wRes = "leases.coordination.k8s.io"
)

// wb builds histories of watches, reads and the store's committed history
// of the Leases in namespace wNS. Times are plain nanoseconds.
type wb struct {
	h      history.History
	nextID uint64
}

func (b *wb) id() uint64 { b.nextID++; return 1000 + b.nextID }

// store records a committed change "ADDED k1=a@5" (DELETED carries the
// last value) at time t.
func (b *wb) store(t int64, spec string) *wb {
	typ, key, value, rv := parseWatchSpec(spec)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreEventType(typ), Resource: wRes, Namespace: wNS, Name: key,
		RV: rv, Object: []byte(fmt.Sprintf(`{"kind":"Lease","metadata":{"name":%q,"resourceVersion":%q},"spec":{"holderIdentity":%q}}`, key, rv, value)), T: t})
	return b
}

// end says the store lines are complete through rv.
func (b *wb) end(rv int) *wb {
	b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: history.LogStoreEventsEnd,
		Attrs: map[string]string{"resource": wRes, "namespace": wNS, "rv": strconv.Itoa(rv)}})
	return b
}

// write records a create (expect "") or cas of key to value.
func (b *wb) write(invoke, ret int64, key, expect, value string) *wb {
	f := FuncCreate
	if expect != "" {
		f = FuncCAS
	}
	b.h.Ops = append(b.h.Ops, history.Op{ID: b.id(), Process: 1, Func: f, Key: key, Value: value, Expect: expect,
		Status: history.StatusOK, Invoke: invoke, Return: ret})
	return b
}

// del records an unconditional delete of key.
func (b *wb) del(invoke, ret int64, key string) *wb {
	b.h.Ops = append(b.h.Ops, history.Op{ID: b.id(), Process: 1, Func: FuncDelete, Key: key, Status: history.StatusOK, Invoke: invoke, Return: ret})
	return b
}

// get records a get of key that read "a@5" or "absent", by a reader of
// its own (readers may read at once; a client has one operation at a time).
func (b *wb) get(invoke, ret int64, key, read string) *wb {
	id := b.id()
	op := history.Op{ID: id, Process: 100 + int(id), Func: FuncGet, Key: key, Status: history.StatusOK, Invoke: invoke, Return: ret}
	if read != "absent" {
		op.Found = true
		op.Output, op.RV, _ = strings.Cut(read, "@")
	}
	b.h.Ops = append(b.h.Ops, op)
	return b
}

// list records a list at rv returning items "k1=a@5"; it returns the op's
// ID.
func (b *wb) list(invoke, ret int64, rv int, items ...string) uint64 {
	op := history.Op{ID: b.id(), Process: 3, Func: FuncList, Key: wNS, Status: history.StatusOK, RV: strconv.Itoa(rv), Invoke: invoke, Return: ret}
	for _, it := range items {
		key, rest, _ := strings.Cut(it, "=")
		value, rv, _ := strings.Cut(rest, "@")
		op.Items = append(op.Items, history.Item{Key: key, Value: value, RV: rv})
	}
	b.h.Ops = append(b.h.Ops, op)
	return op.ID
}

// open records watcher w opening stream n from rv, after list op list
// (0: resumed).
func (b *wb) open(t int64, w string, n, from int, list uint64) *wb {
	e := history.WatchEvent{Watcher: w, Stream: n, Phase: history.WatchOpen, Resource: wRes, Namespace: wNS,
		FromRV: strconv.Itoa(from), Reason: history.WatchResume, T: t}
	if list != 0 {
		e.Reason, e.List = history.WatchFromList, list
	}
	b.h.Watch = append(b.h.Watch, e)
	return b
}

// ev records watcher w's stream n delivering "MODIFIED k1=b@7" or
// "BOOKMARK @10".
func (b *wb) ev(t int64, w string, n int, spec string) *wb {
	typ, key, value, rv := parseWatchSpec(spec)
	b.h.Watch = append(b.h.Watch, history.WatchEvent{Watcher: w, Stream: n, Phase: history.WatchDeliver,
		Type: typ, Key: key, Value: value, RV: rv, T: t})
	return b
}

func (b *wb) close(t int64, w string, n int, code int) *wb {
	e := history.WatchEvent{Watcher: w, Stream: n, Phase: history.WatchClose, Code: code, T: t}
	if code != 0 {
		e.Error = "gone"
	}
	b.h.Watch = append(b.h.Watch, e)
	return b
}

func parseWatchSpec(spec string) (typ, key, value, rv string) {
	typ, rest, _ := strings.Cut(spec, " ")
	kv, rv, _ := strings.Cut(rest, "@")
	key, value, _ = strings.Cut(kv, "=")
	return typ, key, value, rv
}

// committedBase is the committed history the tests share: k1 created (a) at
// RV 5 and updated (b) at RV 7, k2 created (c) at RV 8, k1 deleted at RV 9;
// the store lines are complete through RV 10.
func committedBase() *wb {
	b := &wb{}
	b.write(1, 6, "k1", "", "a").write(10, 16, "k1", "a", "b").write(17, 22, "k2", "", "c").del(23, 28, "k1")
	b.store(5, "ADDED k1=a@5").store(15, "MODIFIED k1=b@7").store(21, "ADDED k2=c@8").store(27, "DELETED k1=b@9").end(10)
	return b
}

// cleanWatch is a fault-free history: one watcher lists at RV 4, watches,
// resumes after a clean close, and gets a bookmark; reads that follow
// deliveries see what was delivered, and a list returns the state at its RV.
func cleanWatch() *wb {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").close(17, "w0", 1, 0)
	b.open(18, "w0", 2, 7, 0).ev(22, "w0", 2, "ADDED k2=c@8").ev(28, "w0", 2, "DELETED k1=b@9").ev(30, "w0", 2, "BOOKMARK @10").close(31, "w0", 2, 0)
	b.get(17, 18, "k1", "b@7").get(23, 24, "k2", "c@8")
	b.list(29, 30, 9, "k2=c@8")
	return b
}

// watchChecks are the four watch checkers, in Catalog order.
var watchChecks = []struct {
	name  string
	check func(context.Context, *history.History, Options) Result
}{
	{WatchOrderChecker, CheckWatchOrder},
	{WatchValueChecker, CheckWatchValues},
	{ReadAfterWatchChecker, CheckReadAfterWatch},
	{ListChecker, CheckLists},
}

func runWatchChecks(h *history.History) map[string]Result {
	out := map[string]Result{}
	for _, c := range watchChecks {
		out[c.name] = c.check(context.Background(), h, Options{})
	}
	return out
}

func TestWatchChecksCleanHistory(t *testing.T) {
	b := cleanWatch()
	results := runWatchChecks(&b.h)
	for _, c := range watchChecks {
		r := results[c.name]
		if r.Verdict != Ok || r.Checker != c.name {
			t.Errorf("%s: %s: %s", c.name, r.Verdict, r.Summary)
		}
	}
	if got := results[WatchOrderChecker].Stats; got.Ops != 5 || got.Checked != 5 {
		t.Errorf("order stats %+v, want 5 deliveries judged", got)
	}
	if got := results[ReadAfterWatchChecker].Stats.Checked; got != 3 {
		t.Errorf("read-after-watch judged %d reads, want the 2 gets and the list", got)
	}
	if got := results[ListChecker].Stats; got.Ops != 2 || got.Checked != 2 {
		t.Errorf("list stats %+v, want the watcher's list and the reader's", got)
	}
}

// Each hand-made violation is Illegal with evidence naming the watcher, the
// stream, the resourceVersions and the keys, and leaves the other checkers'
// verdicts alone.
func TestWatchChecksBite(t *testing.T) {
	type want struct {
		illegal []string // checkers that must say Illegal; the others say Ok
		words   []string // in the first evidence of the first of them
	}
	tests := []struct {
		name  string
		build func() *wb
		want  want
	}{{
		name: "gap",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(22, "w0", 1, "ADDED k2=c@8")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"watcher w0 stream 1", "a gap", "MODIFIED k1=\"b\" at RV 7", "after RV 5"}},
	}, {
		name: "reorder",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(22, "w0", 1, "ADDED k2=c@8").ev(23, "w0", 1, "MODIFIED k1=b@7")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"watcher w0 stream 1", "out of order", "ADDED k2=\"c\" at RV 8", "RV 7"}},
	}, {
		name: "duplicate",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").ev(17, "w0", 1, "MODIFIED k1=b@7")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"watcher w0 stream 1", "a duplicate", "RV 7"}},
	}, {
		name: "event no write produced",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(8, "w0", 1, "MODIFIED k1=z@6").ev(16, "w0", 1, "MODIFIED k1=b@7")
			return b
		},
		want: want{[]string{WatchValueChecker}, []string{"watcher w0 stream 1", "no change", "RV 6", "no write produced it"}},
	}, {
		name: "wrong value",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=x@7")
			return b
		},
		want: want{[]string{WatchValueChecker}, []string{"MODIFIED k1=\"x\" at RV 7", "committed at RV 7 is MODIFIED k1=\"b\""}},
	}, {
		name: "resume skips",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").close(9, "w0", 1, 0)
			b.open(17, "w0", 2, 7, 0).ev(22, "w0", 2, "ADDED k2=c@8")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"watcher w0 stream 2", "(resumed)", "after RV 5", "resumed from RV \"7\" instead", "MODIFIED k1=\"b\" at RV 7", "a gap"}},
	}, {
		name: "resume repeats",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").close(17, "w0", 1, 0)
			b.open(18, "w0", 2, 5, 0).ev(19, "w0", 2, "MODIFIED k1=b@7").ev(22, "w0", 2, "ADDED k2=c@8")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"watcher w0 stream 2", "a duplicate", "already received RV 7"}},
	}, {
		name: "bookmark over a gap",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "BOOKMARK @8")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"BOOKMARK at RV 8", "2 committed changes", "a gap"}},
	}, {
		name: "bookmark goes back",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7").ev(17, "w0", 1, "BOOKMARK @6")
			return b
		},
		want: want{[]string{WatchOrderChecker}, []string{"BOOKMARK at RV 6", "goes back", "RV 7"}},
	}, {
		name: "absent after the watch delivered the create",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5")
			b.get(7, 8, "k1", "absent")
			return b
		},
		want: want{[]string{ReadAfterWatchChecker}, []string{"watcher w0 stream 1 delivered ADDED k1=\"a\" at RV 5", "get of k1", "returned k1 absent", "next deletion (RV 9) was committed after the read returned"}},
	}, {
		name: "absent although no deletion follows",
		build: func() *wb {
			b := committedBase()
			l := b.list(17, 18, 7, "k1=b@7")
			b.open(18, "w0", 1, 7, l).ev(22, "w0", 1, "ADDED k2=c@8")
			b.get(23, 24, "k2", "absent")
			// A later change, written by an operation invoked after the
			// read returned, shows the record reaches past the read.
			b.write(30, 35, "k3", "", "d").store(34, "ADDED k3=d@10")
			return b
		},
		want: want{[]string{ReadAfterWatchChecker}, []string{"delivered ADDED k2=\"c\" at RV 8", "returned k2 absent", "no deletion of the key followed"}},
	}, {
		name: "stale version after the watch delivered the update",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7")
			b.get(17, 18, "k1", "a@5")
			return b
		},
		want: want{[]string{ReadAfterWatchChecker}, []string{"delivered MODIFIED k1=\"b\" at RV 7", "returned k1=\"a\" at RV 5, older than MODIFIED k1=\"b\" at RV 7"}},
	}, {
		name: "absent although the next deletion came after the read",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			// The watcher saw k1=b at RV 7 at 16; the get at [17, 18]
			// says absent, but k1's deletion (RV 9) follows k2's create
			// (RV 8), invoked only at 17... so move that create after the
			// get: invoked at 19.
			b.h.Ops[2].Invoke, b.h.Ops[2].Return = 19, 22
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7")
			b.get(17, 18, "k1", "absent")
			return b
		},
		want: want{[]string{ReadAfterWatchChecker}, []string{"absent", "next deletion (RV 9) was committed after the read returned"}},
	}, {
		name: "list older than a delivered update",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7")
			b.list(17, 18, 5, "k1=a@5")
			return b
		},
		want: want{[]string{ReadAfterWatchChecker}, []string{"list of namespace podsafe-register", "returned k1=\"a\" at RV 5, older than MODIFIED k1=\"b\" at RV 7"}},
	}, {
		name: "list not the state at its RV",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 4)
			b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5")
			b.list(7, 8, 7, "k1=a@5", "k3=q@6")
			return b
		},
		want: want{[]string{ListChecker}, []string{"at RV 7", "k1=\"a\" (RV 5) should be \"b\" (RV 7)", "k3=\"q\" (RV 6) is not there"}},
	}, {
		name: "list misses a key",
		build: func() *wb {
			b := committedBase()
			l := b.list(2, 3, 8, "k1=b@7")
			b.open(3, "w0", 1, 8, l)
			return b
		},
		want: want{[]string{ListChecker}, []string{"at RV 8", "k2=\"c\" (RV 8) is missing"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.build()
			results := runWatchChecks(&b.h)
			for _, c := range watchChecks {
				r := results[c.name]
				wantV := Ok
				for _, n := range tt.want.illegal {
					if n == c.name {
						wantV = Illegal
					}
				}
				if r.Verdict == Unknown && wantV == Ok {
					continue // nothing for this checker to judge here
				}
				if r.Verdict != wantV {
					t.Errorf("%s: %s, want %s: %s", c.name, r.Verdict, wantV, r.Summary)
				}
				if wantV == Illegal && len(r.Evidence) == 0 {
					t.Errorf("%s: Illegal without evidence", c.name)
				}
			}
			first := results[tt.want.illegal[0]]
			if len(first.Evidence) == 0 {
				return
			}
			for _, w := range tt.want.words {
				if !strings.Contains(first.Evidence[0].Description, w) {
					t.Errorf("%s evidence lacks %q:\n%s", first.Checker, w, first.Evidence[0].Description)
				}
			}
		})
	}
}

// A deletion that may have been committed before the read returned
// explains an absent read: no verdict of staleness.
func TestReadAfterWatchDeletionMayComeFirst(t *testing.T) {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(16, "w0", 1, "MODIFIED k1=b@7")
	b.get(17, 30, "k1", "absent") // k1's deletion (RV 9) follows writes invoked by 17
	r := CheckReadAfterWatch(context.Background(), &b.h, Options{})
	if r.Verdict != Ok {
		t.Errorf("%s: %s", r.Verdict, r.Summary)
	}
}

// A stream opened from RV 0 is Kubernetes' "any version": it begins with the
// current state as synthetic ADDED events in key order, not resourceVersion
// order, so the order check does not judge it (until the watcher lists
// again), while an exact start is judged as before.
func TestWatchFromVersionZero(t *testing.T) {
	b := committedBase()
	l := b.list(2, 3, 0)
	b.open(24, "w0", 1, 0, l).ev(25, "w0", 1, "ADDED k1=b@7").ev(25, "w0", 1, "ADDED k2=c@8").ev(28, "w0", 1, "DELETED k1=b@9")
	if r := CheckWatchOrder(context.Background(), &b.h, Options{}); r.Verdict == Illegal {
		t.Errorf("a stream from RV 0: %s: %s", r.Verdict, r.Summary)
	}
	b = committedBase()
	l = b.list(2, 3, 4)
	b.open(24, "w0", 1, 4, l).ev(25, "w0", 1, "ADDED k2=c@8").ev(25, "w0", 1, "ADDED k1=a@5")
	if r := CheckWatchOrder(context.Background(), &b.h, Options{}); r.Verdict != Illegal {
		t.Errorf("the same out-of-order events from RV 4: %s: %s, want Illegal", r.Verdict, r.Summary)
	}
}

// A read that found a key absent cannot be judged stale when the record of
// committed changes may end before the read returned (a run killed midway):
// the deletion that explains it may be the unrecorded part.
func TestReadAfterWatchAbsentPastTheRecord(t *testing.T) {
	b := committedBase()
	l := b.list(17, 18, 7, "k1=b@7")
	b.open(18, "w0", 1, 7, l).ev(22, "w0", 1, "ADDED k2=c@8")
	b.get(23, 24, "k2", "absent")
	r := CheckReadAfterWatch(context.Background(), &b.h, Options{})
	if r.Verdict == Illegal {
		t.Errorf("an absent read past the end of the record: %s: %s", r.Verdict, r.Summary)
	}
}

// With nothing to judge against, each watch checker says Unknown and names
// what is missing.
func TestWatchChecksUnknown(t *testing.T) {
	noWatch := committedBase()
	noWatch.get(17, 18, "k1", "b@7")
	noStore := cleanWatch()
	noStore.h.Store, noStore.h.Logs = nil, nil
	readsBefore := committedBase()
	l := readsBefore.list(2, 3, 4)
	readsBefore.open(3, "w0", 1, 4, l).ev(30, "w0", 1, "ADDED k1=a@5")
	readsBefore.get(20, 21, "k2", "c@8")
	// The store lines were recorded only through RV 4: nothing delivered
	// is covered.
	short := cleanWatch()
	short.h.Store, short.h.Logs = short.h.Store[:0], nil
	short.end(3)

	tests := []struct {
		name  string
		h     *history.History
		words map[string]string // checker -> word in the summary
	}{
		{"no watch lines", &noWatch.h, map[string]string{
			WatchOrderChecker: "records no watch", WatchValueChecker: "records no watch", ReadAfterWatchChecker: "records no watch", ListChecker: "records no watch"}},
		{"no committed history", &noStore.h, map[string]string{
			WatchOrderChecker: "store lines", WatchValueChecker: "store lines", ReadAfterWatchChecker: "store lines", ListChecker: "store lines"}},
		{"reads before any delivery", &readsBefore.h, map[string]string{ReadAfterWatchChecker: "none of 2 reads began after"}},
		{"committed history too short", &short.h, map[string]string{
			WatchValueChecker: "none of 5 delivered events is covered", ReadAfterWatchChecker: "none of 4 reads", ListChecker: "no list the committed history covers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := runWatchChecks(tt.h)
			for name, word := range tt.words {
				r := results[name]
				if r.Verdict != Unknown || !strings.Contains(r.Summary, word) {
					t.Errorf("%s: %s: %q, want Unknown mentioning %q", name, r.Verdict, r.Summary, word)
				}
			}
		})
	}
}

// A loss of store lines ends the committed history where it happened: the
// deliveries after it are not judged, so a gap there is no verdict.
func TestWatchStoreLoss(t *testing.T) {
	b := committedBase()
	l := b.list(2, 3, 4)
	b.open(3, "w0", 1, 4, l).ev(6, "w0", 1, "ADDED k1=a@5").ev(22, "w0", 1, "ADDED k2=c@8")
	b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: history.LogStoreEventsLost, Attrs: map[string]string{"resource": wRes, "after_rv": "5"}})
	r := CheckWatchOrder(context.Background(), &b.h, Options{})
	if r.Verdict != Ok || !strings.Contains(r.Summary, "where the committed history ends") {
		t.Errorf("%s: %s", r.Verdict, r.Summary)
	}
}

func TestWatchChecksCancelled(t *testing.T) {
	b := cleanWatch()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range watchChecks {
		if r := c.check(ctx, &b.h, Options{}); r.Verdict != Unknown || !strings.Contains(r.Summary, "cancelled") {
			t.Errorf("%s: %s: %s, want Unknown: cancelled", c.name, r.Verdict, r.Summary)
		}
	}
}
