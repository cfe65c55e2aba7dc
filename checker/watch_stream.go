package checker

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// watchOrderGuarantees and watchValueGuarantees are what CheckWatchOrder and
// CheckWatchValues judge.
var (
	watchOrderGuarantees = []string{GuaranteeWatchOrder}
	watchValueGuarantees = []string{GuaranteeWatchValue}
)

// CheckWatchOrder judges every watcher's watch streams against the store's
// committed history of the watched set (STORE-WATCH-ORDER). A watcher's
// position is the last resourceVersion it received, an event's or a
// bookmark's; a stream opened from a list starts at the list's
// resourceVersion, a resumed stream (history.WatchResume) carries the
// position over from the watcher's earlier streams, whatever resourceVersion
// it asked for, and a rewound stream (reason "rewind": resumed from an older
// resourceVersion the watcher had received) starts at the resourceVersion it
// asked for, so it must deliver again exactly the committed changes after it
// (the watcher forgets what it received above it). Then every delivered
// event must be the next committed change
// of the set after the position: an event at or below it is a duplicate (the
// watcher already received that resourceVersion) or out of order; committed
// changes between the position and the event that the stream never delivers
// are a gap, and ones it delivers later are out of order. A bookmark at N
// says every change up to N was delivered: committed changes between the
// position and N that were not are a gap, and a bookmark below the position
// goes back. The summary counts the resumed and rewound streams and the
// streams that ended in 410 Gone (a resume or rewind from below the
// store's watch window), so a report shows whether the window's floor was
// reached.
//
// Only what the committed history covers is judged (changes up to the
// resourceVersion through which the store lines are complete). It is pure,
// linear in the watch lines (plus a binary search per event), and answers
// Unknown when ctx ends or opts.Timeout passes first, when h records no
// watch, no committed history of the watched set, or no delivery the
// committed history covers.
func CheckWatchOrder(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, WatchOrderChecker)
}

func checkWatchOrderView(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, WatchOrderChecker, watchOrderGuarantees)
	defer cancel()
	f, unknown := judgeStreams(ctx, v, opts)
	res.Stats = Stats{Ops: f.deliveries, Checked: f.orderJudged, Keys: f.watchers}
	res.Figures = f.figures()
	switch {
	case unknown != "":
		return res.finish(Unknown, unknown)
	case f.cancelled:
		return res.cancelled(count(f.deliveries, "delivered event"))
	case f.orderJudged == 0:
		return res.finish(Unknown, "not checked: "+f.nothingJudged())
	}
	res.Evidence = f.order
	if f.nOrder > 0 {
		return res.finish(Illegal, fmt.Sprintf("%s broke the order of the committed history (gaps, duplicates, events out of order or resumes that skip or repeat); first: %s",
			count(f.nOrder, "delivered event"), f.order[0].Description))
	}
	return res.finish(Ok, fmt.Sprintf("%s on %s of %s follow the committed history in resourceVersion order, with no gap or duplicate; %s continued exactly where the watcher had left off, %s delivered again exactly the changes after the older resourceVersion asked for, and %s ended in 410 Gone, each followed by a relist (%s)%s",
		count(f.orderJudged, "delivered event"), count(f.streams, "stream"), count(f.watchers, "watcher"), count(f.resumes, "resumed stream"),
		count(f.rewinds, "rewound stream"), count(f.gone, "stream"), f.setsNote(), f.notJudgedNote()))
}

// CheckWatchValues judges every delivered event against the store's
// committed history (STORE-WATCH-VALUE): at the event's resourceVersion the
// watched set must have a committed change, of the event's type, on the
// event's key, with the event's value (a Lease's spec.holderIdentity; a
// deletion's object is the object's last state). It shares CheckWatchOrder's
// pass and its bounds, and answers Unknown in the same cases.
func CheckWatchValues(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, WatchValueChecker)
}

func checkWatchValuesView(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, WatchValueChecker, watchValueGuarantees)
	defer cancel()
	f, unknown := judgeStreams(ctx, v, opts)
	res.Stats = Stats{Ops: f.events, Checked: f.valueJudged, Keys: f.watchers}
	switch {
	case unknown != "":
		return res.finish(Unknown, unknown)
	case f.cancelled:
		return res.cancelled(count(f.deliveries, "delivered event"))
	case f.valueJudged == 0:
		return res.finish(Unknown, "not checked: "+f.nothingJudged())
	}
	res.Evidence = f.value
	if f.nValue > 0 {
		return res.finish(Illegal, fmt.Sprintf("%s no write produced; first: %s", count(f.nValue, "watch event"), f.value[0].Description))
	}
	return res.finish(Ok, fmt.Sprintf("each of %s is the committed change at its resourceVersion: type, key and value (%s; %s, %s ended in 410 Gone)%s",
		count(f.valueJudged, "watch event"), f.setsNote(), count(f.rewinds, "rewound stream"), count(f.gone, "stream"), f.notJudgedNote()))
}

// streamFindings is what one pass over the watch streams found.
type streamFindings struct {
	order, value   []Evidence
	nOrder, nValue int
	// deliveries counts events and bookmarks, events the events alone.
	deliveries, events int
	// orderJudged and valueJudged count the deliveries the committed
	// history covers; notJudged those above it, unparsed those whose
	// resourceVersion is no number.
	orderJudged, valueJudged, notJudged, unparsed int
	streams, resumes, watchers, bookmarks         int
	// rewinds counts the rewound streams, gone the streams that ended in
	// 410 Gone.
	rewinds, gone int
	// sets are the watched sets, each with its streams and events.
	sets      map[watchSet]*setCount
	orphans   int
	through   uint64
	cancelled bool
}

func (f *streamFindings) figures() []Figure {
	return []Figure{
		{Name: "watch events delivered", Value: float64(f.events), Unit: "count"},
		{Name: "watch bookmarks delivered", Value: float64(f.bookmarks), Unit: "count"},
		{Name: "watch streams", Value: float64(f.streams), Unit: "count"},
		{Name: "watch streams rewound", Value: float64(f.rewinds), Unit: "count"},
		{Name: "watch streams ended in 410 Gone", Value: float64(f.gone), Unit: "count"},
	}
}

// setCount is what was watched of one set.
type setCount struct{ streams, events int }

// setsNote names the watched sets with their streams and events, sorted.
func (f *streamFindings) setsNote() string {
	sets := make([]watchSet, 0, len(f.sets))
	for s := range f.sets {
		sets = append(sets, s)
	}
	sort.Slice(sets, func(i, j int) bool {
		if sets[i].resource != sets[j].resource {
			return sets[i].resource < sets[j].resource
		}
		return sets[i].namespace < sets[j].namespace
	})
	parts := make([]string, len(sets))
	for i, s := range sets {
		parts[i] = fmt.Sprintf("%s: %s, %s", s, count(f.sets[s].streams, "stream"), count(f.sets[s].events, "event"))
	}
	return strings.Join(parts, "; ")
}

func (f *streamFindings) nothingJudged() string {
	if f.deliveries == 0 {
		return fmt.Sprintf("%s of %s delivered nothing", count(f.streams, "watch stream"), count(f.watchers, "watcher"))
	}
	return fmt.Sprintf("none of %s is covered by the committed history (complete through RV %d)", count(f.deliveries, "delivered event"), f.through)
}

func (f *streamFindings) notJudgedNote() string {
	var notes []string
	if f.notJudged > 0 {
		notes = append(notes, fmt.Sprintf("%s above RV %d, where the committed history ends, not judged", count(f.notJudged, "delivered event"), f.through))
	}
	if f.unparsed > 0 {
		notes = append(notes, fmt.Sprintf("%s without a numeric resourceVersion not judged", count(f.unparsed, "delivered event")))
	}
	if f.orphans > 0 {
		notes = append(notes, fmt.Sprintf("%s of streams whose opening was not recorded ignored", count(f.orphans, "watch line")))
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

// judgeStreams runs the pass of CheckWatchOrder and CheckWatchValues. unknown
// is non-empty when there is nothing to judge against.
func judgeStreams(ctx context.Context, v *view, opts Options) (f *streamFindings, unknown string) {
	h := v.h
	f = &streamFindings{sets: map[watchSet]*setCount{}}
	byName, names, sets, orphans := watchers(h)
	f.watchers, f.orphans = len(names), orphans
	if len(names) == 0 {
		return f, "not checked: the history records no watch"
	}
	cs := committedFor(v, sets)
	var missing []string
	for _, s := range sets {
		if c := cs[s]; !c.recorded {
			missing = append(missing, c.missing())
		} else {
			f.through = max(f.through, c.through)
		}
	}
	if len(missing) > 0 {
		return f, "not checked: " + strings.Join(missing, "; ")
	}
	if ctx.Err() != nil {
		f.cancelled = true
		return f, ""
	}
	st := &stopper{ctx: ctx}
	for _, name := range names {
		w := &watcherPass{f: f, opts: opts}
		for _, s := range byName[name] {
			if st.stopped() {
				f.cancelled = true
				return f, ""
			}
			w.stream(s, cs[s.set])
		}
	}
	return f, ""
}

// watcherPass follows one watcher's position through its streams.
type watcherPass struct {
	f    *streamFindings
	opts Options
	// pos is the last resourceVersion the watcher received (or its list's);
	// valid is false until it is known.
	pos   uint64
	valid bool
	// posFrom says where pos came from, for evidence.
	posFrom string
	// delivered holds the resourceVersions of the events received since the
	// watcher's last list, increasing (an event is accepted only above pos).
	delivered []uint64
}

func (w *watcherPass) stream(s *watchStream, c *committed) {
	f := w.f
	f.streams++
	sc := f.sets[s.set]
	if sc == nil {
		sc = &setCount{}
		f.sets[s.set] = sc
	}
	sc.streams++
	if s.close != nil && s.close.Code == 410 {
		f.gone++
	}
	from, ok := parseRV(s.open.FromRV)
	switch {
	case s.open.Reason == history.WatchResume && w.valid:
		f.resumes++
		if !ok || from != w.pos {
			w.posFrom += fmt.Sprintf("; stream %d resumed from RV %q instead", s.n, s.open.FromRV)
		}
	case s.open.Reason == watchRewind && ok && from > 0:
		// The stream owes exactly the changes after from: what the
		// watcher received above it is due again, not a duplicate.
		f.rewinds++
		w.pos, w.valid = from, true
		w.posFrom = fmt.Sprintf("the older RV stream %d rewound to", s.n)
		w.delivered = w.delivered[:sort.Search(len(w.delivered), func(i int) bool { return w.delivered[i] > from })]
	case ok && from > 0:
		w.pos, w.valid = from, true
		w.posFrom = fmt.Sprintf("the RV stream %d started from", s.n)
		w.delivered = w.delivered[:0]
	default:
		// Where this stream starts is unknown, or it was opened from RV 0
		// (Kubernetes' "any version": it begins with the current state as
		// synthetic ADDED events, in no resourceVersion order): judge
		// nothing until the watcher lists again.
		w.valid = false
		f.unparsed += len(s.events)
		f.deliveries += len(s.events)
		return
	}
	// Resource versions this stream delivers, to tell a late event from a
	// missing one.
	later := map[uint64]int{}
	for i, e := range s.events {
		if rv, ok := parseRV(e.RV); ok && e.Type != watchBookmark {
			later[rv] = i
		}
	}
	reported := map[uint64]bool{}
	for i, e := range s.events {
		f.deliveries++
		rv, ok := parseRV(e.RV)
		isBookmark := e.Type == watchBookmark
		if isBookmark {
			f.bookmarks++
		} else {
			f.events++
			sc.events++
		}
		if !ok {
			f.unparsed++
			continue
		}
		// Above the committed history's end only duplicates and order can
		// be judged, not gaps or values: the committed changes there are
		// unknown.
		if rv <= c.through || w.pos < c.through {
			f.orderJudged++
		} else {
			f.notJudged++
		}
		if isBookmark {
			w.bookmark(s, c, e, rv)
			continue
		}
		if rv <= w.pos {
			switch {
			case w.received(rv):
				w.orderViolation(s, e, fmt.Sprintf("%s: it delivered %s, but the watcher had already received RV %s: a duplicate",
					s, describeDelivery(e), e.RV))
			case reported[rv]:
				// Already reported as delivered out of order.
			default:
				w.orderViolation(s, e, fmt.Sprintf("%s: it delivered %s after the watcher had received RV %d (%s): out of order",
					s, describeDelivery(e), w.pos, w.posFrom))
			}
			w.value(s, c, e, rv)
			continue
		}
		lo, hi := c.between(w.pos, rv)
		if hi > lo {
			var late, lost []change
			for _, ch := range c.changes[lo:hi] {
				if j, ok := later[ch.rv]; ok && j > i {
					late = append(late, ch)
					reported[ch.rv] = true
				} else {
					lost = append(lost, ch)
				}
			}
			if len(late) > 0 {
				w.orderViolation(s, e, fmt.Sprintf("%s: it delivered %s before committed changes it delivered only later: %s: out of order",
					s, describeDelivery(e), describeChanges(late)))
			}
			if len(lost) > 0 {
				w.orderViolation(s, e, fmt.Sprintf("%s: after RV %d (%s) it delivered %s, but %s of %s committed in between never reached the watcher: %s: a gap",
					s, w.pos, w.posFrom, describeDelivery(e), count(len(lost), "change"), c.set, describeChanges(lost)))
			}
		}
		w.value(s, c, e, rv)
		w.delivered = append(w.delivered, rv)
		w.pos, w.posFrom = rv, fmt.Sprintf("the event at RV %d of stream %d", rv, s.n)
	}
}

// received reports whether the watcher received an event at rv since its
// last list.
func (w *watcherPass) received(rv uint64) bool {
	i := sort.Search(len(w.delivered), func(i int) bool { return w.delivered[i] >= rv })
	return i < len(w.delivered) && w.delivered[i] == rv
}

// bookmark judges a bookmark at rv: every committed change up to rv must
// have been delivered.
func (w *watcherPass) bookmark(s *watchStream, c *committed, e history.WatchEvent, rv uint64) {
	if rv < w.pos {
		w.orderViolation(s, e, fmt.Sprintf("%s: a BOOKMARK at RV %d, received at %s, goes back: the watcher had received RV %d (%s)",
			s, rv, nanos(e.T), w.pos, w.posFrom))
		return
	}
	lo, hi := c.between(w.pos, rv+1)
	if hi > lo {
		w.orderViolation(s, e, fmt.Sprintf("%s: a BOOKMARK at RV %d, received at %s, says every change up to it was delivered, but after RV %d (%s) %s of %s never reached the watcher: %s: a gap",
			s, rv, nanos(e.T), w.pos, w.posFrom, count(hi-lo, "committed change"), c.set, describeChanges(c.changes[lo:hi])))
	}
	w.pos, w.posFrom = rv, fmt.Sprintf("the BOOKMARK at RV %d of stream %d", rv, s.n)
}

// value judges an event against the committed change at its RV.
func (w *watcherPass) value(s *watchStream, c *committed, e history.WatchEvent, rv uint64) {
	if rv > c.through {
		return
	}
	w.f.valueJudged++
	j, ok := c.at[rv]
	if !ok {
		w.valueViolation(e, fmt.Sprintf("%s: it delivered %s, but no change of %s was committed at RV %d: no write produced it",
			s, describeDelivery(e), c.set, rv))
		return
	}
	ch := c.changes[j]
	if e.Type != string(ch.typ) || e.Key != ch.key || (valueKnown(c.set.resource) && e.Value != ch.value) {
		w.valueViolation(e, fmt.Sprintf("%s: it delivered %s, but the change committed at RV %d is %s",
			s, describeDelivery(e), rv, ch))
	}
}

func (w *watcherPass) orderViolation(s *watchStream, e history.WatchEvent, desc string) {
	w.f.nOrder++
	if len(w.f.order) < w.opts.maxEvidence() {
		w.f.order = append(w.f.order, Evidence{Key: watchEvidenceKey(s, e), Description: desc})
	}
}

func (w *watcherPass) valueViolation(e history.WatchEvent, desc string) {
	w.f.nValue++
	if len(w.f.value) < w.opts.maxEvidence() {
		w.f.value = append(w.f.value, Evidence{Key: e.Key, Description: desc})
	}
}

// watchEvidenceKey names what an order violation is about: the event's key,
// or the watcher for a bookmark.
func watchEvidenceKey(s *watchStream, e history.WatchEvent) string {
	if e.Key != "" {
		return e.Key
	}
	return "watcher " + s.watcher
}

// watchBookmark is the type of a bookmark event.
const watchBookmark = "BOOKMARK"

// watchRewind is the Reason of a watch request resumed from an older
// resourceVersion its watcher had received rather than the last
// (workload.WatchRewind).
const watchRewind = "rewind"
