package checker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// readAfterWatchGuarantees and listGuarantees are what CheckReadAfterWatch
// and CheckLists judge.
var (
	readAfterWatchGuarantees = []string{GuaranteeReadAfterWatch}
	listGuarantees           = []string{GuaranteeList}
)

// CheckReadAfterWatch judges every successful read of a watched set (a
// register get, its key a name in the one watched namespace, or a list of
// the namespace) that began after some watch had delivered resourceVersion N
// (an event or a bookmark whose watch line was recorded before the read's
// invoke), STORE-READ-AFTER-WATCH: for every key, the read must reflect the
// key's last committed change at or below N. It must not return a version
// older than that change (an object whose resourceVersion is below it), nor
// "absent" when that change created or updated the key, unless a deletion of
// the key committed after it may have been committed before the read
// returned (a deletion's commit is bounded from below by the invoke of the
// latest write committed before it, since resourceVersions follow commit
// order and every written value names one operation). N is capped at the
// resourceVersion through which the committed history is complete: a read
// that must reflect N must also reflect every smaller one.
//
// Only the register's Leases are read so: a history whose watches are all
// of other resources (pods, sets) leaves the zero Result, as a checker that
// does not apply. It is pure, O((reads + deliveries) log n) plus the keys
// of each list, and answers Unknown when ctx ends or opts.Timeout passes first, when h records
// no watch or no committed history of the watched set, or when no read
// began after a delivery the committed history covers.
func CheckReadAfterWatch(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, ReadAfterWatchChecker)
}

func checkReadAfterWatchView(ctx context.Context, v *view, opts Options) Result {
	h := v.h
	res, ctx, cancel := startCheck(ctx, opts, ReadAfterWatchChecker, readAfterWatchGuarantees)
	defer cancel()
	rd, unknown := newWatchReads(v)
	if unknown != "" {
		return res.finish(Unknown, unknown)
	}
	if rd == nil {
		return Result{} // does not apply: no watched set is read
	}
	if ctx.Err() != nil {
		return res.cancelled(count(len(rd.reads), "read"))
	}
	present := rd.presentForLists(h)
	st := &stopper{ctx: ctx}
	var evidence []Evidence
	violations, keysJudged := 0, 0
	keys := map[string]bool{}
	for _, r := range rd.reads {
		if st.stopped() {
			return res.cancelled(count(len(rd.reads), "read"))
		}
		op := &h.Ops[r.op]
		res.Stats.Ops++
		d := rd.deliveredBefore(r.set, op.Invoke)
		if d == nil {
			continue
		}
		c := rd.committed[r.set]
		n := min(d.rv, c.through)
		judged := false
		for _, k := range r.keys(op, present[r.op]) {
			i := c.lastWrite(k, n)
			if i < 0 {
				continue
			}
			desc, judgeable := staleRead(c, op, k, i)
			if !judgeable {
				continue
			}
			judged = true
			keysJudged++
			keys[k] = true
			if desc != "" {
				violations++
				if len(evidence) < opts.maxEvidence() {
					evidence = append(evidence, readAfterWatchEvidence(h, c, op, k, i, d, n, desc))
				}
			}
		}
		if judged {
			res.Stats.Checked++
		}
	}
	res.Stats.Keys = len(keys)
	res.Evidence = evidence
	switch {
	case res.Stats.Checked == 0:
		return res.finish(Unknown, fmt.Sprintf("not checked: none of %s began after a watch delivered a resourceVersion the committed history covers", count(res.Stats.Ops, "read")))
	case violations > 0:
		return res.finish(Illegal, fmt.Sprintf("%s missed a write that a watch had delivered before the read began; first: %s",
			count(violations, "key read"), evidence[0].Description))
	}
	return res.finish(Ok, fmt.Sprintf("%s (%s over %s) began after a watch delivery and reflected every write up to the resourceVersion delivered",
		count(res.Stats.Checked, "read"), count(keysJudged, "key read"), count(len(keys), "key")))
}

// staleRead says how a read of key by op misses changes[i], the key's last
// committed change at or below the delivered resourceVersion; "" when it
// does not. judgeable is false when the history cannot tell: the read found
// the key absent, no recorded deletion follows changes[i], and the record of
// committed changes may end before the read returned (a run cut short), so
// a deletion committed in time may be missing from it.
func staleRead(c *committed, op *history.Op, key string, i int) (desc string, judgeable bool) {
	lw := c.changes[i]
	if item, found := readOf(op, key); found {
		rv, ok := parseRV(item.RV)
		if !ok || rv >= lw.rv {
			return "", true
		}
		return fmt.Sprintf("it returned %s=%q at RV %d, older than %s", key, item.Value, rv, lw), true
	}
	if lw.typ == history.StoreDeleted {
		return "", true
	}
	if d := c.nextDelete(key, i); d >= 0 {
		if c.notBefore[d] <= op.Return {
			return "", true // the deletion may have come first
		}
		return fmt.Sprintf("it returned %s absent, but %s, and the key's next deletion (RV %d) was committed after the read returned (a write committed before it was invoked only at %s)",
			key, lw, c.changes[d].rv, nanos(c.notBefore[d])), true
	}
	// "No deletion followed" needs a record that reaches past the read: a
	// recorded change whose value was written by an operation invoked after
	// the read returned was committed after it, and RV order is commit
	// order, so every change committed before the read returned is recorded.
	if last := len(c.notBefore) - 1; last < 0 || c.notBefore[last] <= op.Return {
		return "", false
	}
	return fmt.Sprintf("it returned %s absent, but %s and no deletion of the key followed", key, lw), true
}

// readOf returns what op read of key: the object a get found, or a list's
// item.
func readOf(op *history.Op, key string) (history.Item, bool) {
	if op.Func == FuncGet {
		return history.Item{Key: key, Value: op.Output, RV: op.RV}, op.Found
	}
	for _, it := range op.Items {
		if it.Key == key {
			return it, true
		}
	}
	return history.Item{}, false
}

func readAfterWatchEvidence(h *history.History, c *committed, op *history.Op, key string, i int, d *delivery, n uint64, desc string) Evidence {
	what := fmt.Sprintf("get of %s", key)
	if op.Func == FuncList {
		what = fmt.Sprintf("list of namespace %s", op.Key)
	}
	capped := ""
	if n < d.rv {
		capped = fmt.Sprintf(" (judged up to RV %d, where the committed history ends)", n)
	}
	ev := Evidence{
		Key: key,
		Description: fmt.Sprintf("watcher %s stream %d delivered %s before the %s (op %d, process %d) began at %s%s; %s",
			d.line.Watcher, d.line.Stream, describeDelivery(d.line), what, op.ID, op.Process, nanos(op.Invoke), capped, desc),
		Ops: []history.Op{*op},
	}
	if lw := c.changes[i]; lw.typ != history.StoreDeleted {
		for _, w := range h.Ops {
			if w.Value == lw.value && (w.Func == FuncCreate || w.Func == FuncCAS) {
				ev.Ops = append([]history.Op{w}, ev.Ops...)
				break
			}
		}
	}
	return ev
}

// CheckLists judges every successful list of a watched namespace whose
// resourceVersion R the committed history covers (STORE-LIST): its items
// must be exactly the objects present at R, each with the value and
// resourceVersion of its last change at or below R. Lists made by watchers
// to start or restart their watches are judged alike. The API server
// answers a list at the newest state and names it by its resourceVersion;
// a list pinned to an older one (resourceVersionMatch=Exact) is judged the
// same way. Like CheckReadAfterWatch it judges the register's Leases only,
// and leaves the zero Result when no watched set is one. It is pure,
// O(lists × keys × log n), and answers Unknown when
// ctx ends or opts.Timeout passes first, when h records no watch or no
// committed history of the namespace, or when no list is covered.
func CheckLists(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, ListChecker)
}

func checkListsView(ctx context.Context, v *view, opts Options) Result {
	h := v.h
	res, ctx, cancel := startCheck(ctx, opts, ListChecker, listGuarantees)
	defer cancel()
	rd, unknown := newWatchReads(v)
	if unknown != "" {
		return res.finish(Unknown, unknown)
	}
	if rd == nil {
		return Result{} // does not apply: no watched set is read
	}
	if ctx.Err() != nil {
		return res.cancelled("the lists")
	}
	// The lists in resourceVersion order, so that one walk over each
	// committed history yields every state they are compared with.
	type list struct {
		r  watchRead
		rv uint64
	}
	var lists []list
	violations, above, unparsed := 0, 0, 0
	for _, r := range rd.reads {
		op := &h.Ops[r.op]
		if op.Func != FuncList {
			continue
		}
		res.Stats.Ops++
		rv, ok := parseRV(op.RV)
		switch {
		case !ok:
			unparsed++
		case rv > rd.committed[r.set].through:
			above++
		default:
			lists = append(lists, list{r, rv})
		}
	}
	sort.SliceStable(lists, func(i, j int) bool { return lists[i].rv < lists[j].rv })
	cursors := map[watchSet]*stateCursor{}
	st := &stopper{ctx: ctx}
	for _, l := range lists {
		if st.stopped() {
			return res.cancelled(count(res.Stats.Ops, "list"))
		}
		op, rv, c := &h.Ops[l.r.op], l.rv, rd.committed[l.r.set]
		cur := cursors[l.r.set]
		if cur == nil {
			cur = c.cursor()
			cursors[l.r.set] = cur
		}
		res.Stats.Checked++
		if diff := listDiff(cur.at(rv), op.Items); diff != "" {
			violations++
			if len(res.Evidence) < opts.maxEvidence() {
				res.Evidence = append(res.Evidence, Evidence{
					Key: op.Key,
					Description: fmt.Sprintf("the list of namespace %s (op %d, process %d, [%s, %s]) at RV %d returned %s, but the committed state of %s at RV %d differs: %s",
						op.Key, op.ID, op.Process, nanos(op.Invoke), nanos(op.Return), rv, count(len(op.Items), "item"), c.set, rv, diff),
					Ops: []history.Op{*op},
				})
			}
		}
	}
	var notes []string
	if above > 0 {
		notes = append(notes, fmt.Sprintf("%s above the end of the committed history not judged", count(above, "list")))
	}
	if unparsed > 0 {
		notes = append(notes, fmt.Sprintf("%s without a numeric resourceVersion not judged", count(unparsed, "list")))
	}
	note := ""
	if len(notes) > 0 {
		note = " (" + strings.Join(notes, "; ") + ")"
	}
	switch {
	case res.Stats.Checked == 0:
		return res.finish(Unknown, fmt.Sprintf("not checked: no list the committed history covers among %s%s", count(res.Stats.Ops, "list"), note))
	case violations > 0:
		return res.finish(Illegal, fmt.Sprintf("%s did not return the state at their resourceVersion%s; first: %s", count(violations, "list"), note, res.Evidence[0].Description))
	}
	return res.finish(Ok, fmt.Sprintf("%s returned exactly the committed state at their resourceVersion%s", count(res.Stats.Checked, "list"), note))
}

// listDiff describes how items differ from state; "" when they are equal.
func listDiff(state map[string]change, items []history.Item) string {
	var parts []string
	got := map[string]bool{}
	for _, it := range items {
		got[it.Key] = true
		want, ok := state[it.Key]
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("%s=%q (RV %s) is not there", it.Key, it.Value, it.RV))
		case it.Value != want.value || it.RV != fmt.Sprint(want.rv):
			parts = append(parts, fmt.Sprintf("%s=%q (RV %s) should be %q (RV %d)", it.Key, it.Value, it.RV, want.value, want.rv))
		}
	}
	var missing []string
	for k := range state {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		parts = append(parts, fmt.Sprintf("%s=%q (RV %d) is missing", k, state[k].value, state[k].rv))
	}
	return strings.Join(parts, "; ")
}

// delivery is one watch delivery of a set with a numeric resourceVersion.
type delivery struct {
	rv   uint64
	line history.WatchEvent
}

// watchReads is what CheckReadAfterWatch and CheckLists read: the reads of
// the watched sets, their committed histories, and per set the deliveries
// in time order with the running maximum of their resourceVersions.
type watchReads struct {
	reads     []watchRead
	committed map[watchSet]*committed
	// times, best: per set, the deliveries' times in order and, at each,
	// the delivery with the largest resourceVersion so far.
	times map[watchSet][]int64
	best  map[watchSet][]*delivery
}

// watchRead is one successful read of a watched set: ops[op].
type watchRead struct {
	op  int
	set watchSet
	key string // the get's key; "" for a list
}

// keys returns the keys read op is judged on: a get's key, or every key a
// list returned or that was present at the resourceVersion the list must
// reflect (present), sorted.
func (r watchRead) keys(op *history.Op, present []string) []string {
	if r.key != "" {
		return []string{r.key}
	}
	set := map[string]bool{}
	for _, it := range op.Items {
		set[it.Key] = true
	}
	for _, k := range present {
		set[k] = true
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// presentForLists returns, for each list read (by op index) that began
// after a delivery, the keys present at the resourceVersion it must
// reflect: the largest delivered before it, capped at the committed
// history's end. One forward walk per set serves them all.
func (rd *watchReads) presentForLists(h *history.History) map[int][]string {
	type at struct {
		r watchRead
		n uint64
	}
	var lists []at
	for _, r := range rd.reads {
		if r.key != "" {
			continue
		}
		if d := rd.deliveredBefore(r.set, h.Ops[r.op].Invoke); d != nil {
			lists = append(lists, at{r, min(d.rv, rd.committed[r.set].through)})
		}
	}
	sort.SliceStable(lists, func(i, j int) bool { return lists[i].n < lists[j].n })
	out := make(map[int][]string, len(lists))
	cursors := map[watchSet]*stateCursor{}
	for _, l := range lists {
		cur := cursors[l.r.set]
		if cur == nil {
			cur = rd.committed[l.r.set].cursor()
			cursors[l.r.set] = cur
		}
		for k := range cur.at(l.n) {
			out[l.r.op] = append(out[l.r.op], k)
		}
	}
	return out
}

// newWatchReads gathers the reads of the watched sets. It returns nil and
// no reason when no watched set is one the register's reads read (its
// Leases): the read checkers do not apply to watches of pods or sets, whose
// gets and lists the workloads record without the items these checkers
// compare.
func newWatchReads(v *view) (*watchReads, string) {
	h := v.h
	byName, names, watched, _ := watchers(h)
	if len(names) == 0 {
		return nil, "not checked: the history records no watch"
	}
	var sets []watchSet
	read := map[watchSet]bool{}
	for _, s := range watched {
		if s.resource == leaseResource {
			sets = append(sets, s)
			read[s] = true
		}
	}
	if len(sets) == 0 {
		return nil, ""
	}
	rd := &watchReads{committed: committedFor(v, sets), times: map[watchSet][]int64{}, best: map[watchSet][]*delivery{}}
	var missing []string
	for _, s := range sets {
		if c := rd.committed[s]; !c.recorded {
			missing = append(missing, c.missing())
		}
	}
	if len(missing) > 0 {
		return nil, "not checked: " + strings.Join(missing, "; ")
	}
	var all []struct {
		set watchSet
		d   *delivery
	}
	for _, name := range names {
		for _, s := range byName[name] {
			if !read[s.set] {
				continue
			}
			for _, e := range s.events {
				if rv, ok := parseRV(e.RV); ok {
					all = append(all, struct {
						set watchSet
						d   *delivery
					}{s.set, &delivery{rv: rv, line: e}})
				}
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d.line.T < all[j].d.line.T })
	for _, a := range all {
		b := rd.best[a.set]
		if n := len(b); n > 0 && b[n-1].rv >= a.d.rv {
			rd.best[a.set] = append(b, b[n-1])
		} else {
			rd.best[a.set] = append(b, a.d)
		}
		rd.times[a.set] = append(rd.times[a.set], a.d.line.T)
	}
	byNamespace := map[string][]watchSet{}
	for _, s := range sets {
		byNamespace[s.namespace] = append(byNamespace[s.namespace], s)
	}
	for i, op := range h.Ops {
		if op.Status != history.StatusOK {
			continue
		}
		switch {
		case op.Func == FuncGet && len(sets) == 1:
			rd.reads = append(rd.reads, watchRead{op: i, set: sets[0], key: op.Key})
		case op.Func == FuncList && len(byNamespace[op.Key]) == 1:
			rd.reads = append(rd.reads, watchRead{op: i, set: byNamespace[op.Key][0]})
		}
	}
	return rd, ""
}

// deliveredBefore returns the delivery of set with the largest
// resourceVersion among those received before t, or nil.
func (rd *watchReads) deliveredBefore(set watchSet, t int64) *delivery {
	ts := rd.times[set]
	i := sort.Search(len(ts), func(i int) bool { return ts[i] >= t }) - 1
	if i < 0 {
		return nil
	}
	return rd.best[set][i]
}
