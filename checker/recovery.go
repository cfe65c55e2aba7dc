package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// Recovery measures availability, not safety: how long each pet was down and
// how long it took to come back after each fault. It is no verdict (a pet
// may stay down for as long as the cluster cannot place it safely), only
// figures for reports.

// RecoveryReport is what Recovery measured over one history.
type RecoveryReport struct {
	// Pets are the pets the ledger saw start, by identity.
	Pets []PetAvailability `json:"pets"`
	// Faults are the history's faults, in start order, each with the pets
	// that went down during it.
	Faults []FaultRecovery `json:"faults"`
	// Scale is the cluster clock's speed relative to wall time, estimated
	// from the ledger; scaled durations are wall durations times Scale.
	Scale float64 `json:"scale"`
}

// PetAvailability is one pet's time without a running instance.
type PetAvailability struct {
	// Pet is the pet's identity, namespace/name.
	Pet string `json:"pet"`
	// FirstStart is the recorder time of its first container start.
	FirstStart int64 `json:"first_start"`
	// UIDs counts the pod instances of the pet that ran.
	UIDs int `json:"uids"`
	// Wanted is the time from its first start to the end of the history
	// during which its set wanted it (the set's replicas exceeded its
	// ordinal), on the scaled clock; WantedWall on the recorder's.
	Wanted     time.Duration `json:"wanted_ns"`
	WantedWall time.Duration `json:"wanted_wall_ns"`
	// Unavailable is the part of Wanted during which no instance of the pet
	// ran: the sum of Outages.
	Unavailable     time.Duration `json:"unavailable_ns"`
	UnavailableWall time.Duration `json:"unavailable_wall_ns"`
	// Longest is the longest outage (zero when there was none).
	Longest     time.Duration `json:"longest_ns"`
	LongestWall time.Duration `json:"longest_wall_ns"`
	Outages     []Outage      `json:"outages,omitempty"`
}

// Availability is the share of the wanted time the pet ran, in percent
// (100 when it was never wanted after its first start).
func (p PetAvailability) Availability() float64 {
	if p.WantedWall <= 0 {
		return 100
	}
	return 100 * float64(p.WantedWall-p.UnavailableWall) / float64(p.WantedWall)
}

// OutageEnd says how an outage ended.
type OutageEnd string

// The ways an outage ends.
const (
	// EndRecovered: an instance of the pet started again.
	EndRecovered OutageEnd = "recovered"
	// EndScaledDown: its set stopped wanting the pet first.
	EndScaledDown OutageEnd = "scaled-down"
	// EndHistory: the history ended first; the pet did not recover.
	EndHistory OutageEnd = "not-recovered"
)

// Outage is a time during which a pet was wanted and no instance of it ran.
// Times are recorder nanoseconds.
type Outage struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Ended names the instance (UID) whose end began the outage, and its
	// node; both are empty when the outage began with a scale-up of a pet
	// that was not running.
	Ended     string `json:"ended,omitempty"`
	EndedNode string `json:"ended_node,omitempty"`
	// Fenced marks an outage that began when the store recorded the node
	// of the instance fenced, while it still ran there (cut off, PS-14).
	Fenced bool      `json:"fenced,omitempty"`
	How    OutageEnd `json:"how"`
	// Next is the UID that started at End when How is EndRecovered, and
	// Node its node; NewUID tells whether it is another instance than
	// Ended (rather than a container restart of the same one).
	Next   string `json:"next,omitempty"`
	Node   string `json:"node,omitempty"`
	NewUID bool   `json:"new_uid,omitempty"`
}

// FaultRecovery is what followed one fault: the pets whose running instance
// ended during it, and when each came back.
type FaultRecovery struct {
	Fault history.Interval `json:"fault"`
	Pets  []PetRecovery    `json:"pets,omitempty"`
}

// PetRecovery is one pet's recovery from one fault.
type PetRecovery struct {
	Pet string `json:"pet"`
	// Down is the recorder time its instance ended, during the fault.
	Down int64 `json:"down"`
	// How is how its outage ended. Only EndRecovered has a time to
	// recovery; EndHistory means it never came back before the history
	// ended, and EndScaledDown that its set no longer wanted it.
	How OutageEnd `json:"how"`
	// TTR is the time from the fault's start to the start of the pet's
	// next instance, on the scaled clock; TTRWall on the recorder's. Both
	// are zero unless How is EndRecovered.
	TTR     time.Duration `json:"ttr_ns,omitempty"`
	TTRWall time.Duration `json:"ttr_wall_ns,omitempty"`
	// Downtime is the pet's own outage, from Down to its next start (or
	// to the scale-down or the history's end); it is shorter than TTR when
	// the instance ended late in the fault.
	Downtime     time.Duration `json:"downtime_ns"`
	DowntimeWall time.Duration `json:"downtime_wall_ns"`
	// Next is the UID that started, and Node where.
	Next string `json:"next,omitempty"`
	Node string `json:"node,omitempty"`
}

// Recovered reports a pet that came back, so TTR is meaningful.
func (p PetRecovery) Recovered() bool { return p.How == EndRecovered }

// Recovery measures, from the ledger, how available the pets of h were: a pet
// is a pod named <set>-<ordinal> that the pet controller created (see
// podCreators); other pods are ignored. A pet runs while a container of any
// of its UIDs runs (from its start to its exit or power-off, or to the
// moment the store records the node fenced, whichever comes first, as for
// at-most-one). After its first start, a pet is wanted while its StatefulSet
// (as the store last recorded it) has more replicas than its ordinal; a pet
// whose set the store never recorded is wanted throughout. An outage is a
// time the pet is wanted and does not run; it ends when an instance starts,
// when the set stops wanting the pet, or with the history.
//
// For each fault of h.Nemesis, every outage that began with the end of an
// instance during the fault (start to end inclusive) is a recovery: its time
// to recovery runs from the fault's start to the next start of the pet; one
// still down at the history's end is reported as not recovered, with no
// time.
//
// Durations come on the recorder's clock (wall) and on the cluster's scaled
// clock, whose speed is estimated from the ledger (RecoveryReport.Scale), so
// that nodes' skewed clocks do not distort them. Recovery is pure and reads
// h without changing it.
func Recovery(h *history.History) RecoveryReport {
	v, done := standaloneView(context.Background(), h)
	defer done()
	rep, _ := recovery(context.Background(), v)
	return rep
}

// recovery is Recovery from a view; false when ctx ended before the parts
// of the view it reads were built.
func recovery(ctx context.Context, v *view) (RecoveryReport, bool) {
	h := v.h
	rep := RecoveryReport{Scale: ledgerScale(h.Ledger)}
	creators, ok := v.creators(ctx)
	if !ok {
		return rep, false
	}
	nodes, ok := v.nodes(ctx)
	if !ok {
		return rep, false
	}
	runs, ok := v.runs(ctx)
	if !ok {
		return rep, false
	}
	fences := nodes.fences
	wanted := setReplicas(h.Store)

	type span struct {
		start, end int64
		uid, node  string
		fenced     bool
	}
	byPet := map[string][]span{}
	kinds := map[string]podKind{}
	for _, r := range runs {
		k, ok := kinds[r.uid]
		if !ok {
			k = creators.classify(h.API, r.uid, r.pod)
			kinds[r.uid] = k
		}
		if k != kindPet {
			continue
		}
		s := span{start: h.Ledger[r.start].T, end: r.endT(h.Ledger), uid: r.uid, node: r.node}
		for _, f := range fences[r.node] {
			if f >= s.start {
				if f < s.end {
					s.end, s.fenced = f, true
				}
				break
			}
		}
		byPet[r.pod] = append(byPet[r.pod], s)
	}

	end := h.End
	pets := make([]string, 0, len(byPet))
	for p := range byPet {
		pets = append(pets, p)
	}
	sort.Strings(pets)
	for _, pet := range pets {
		spans := byPet[pet]
		sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		pa := PetAvailability{Pet: pet, FirstStart: spans[0].start}
		uids := map[string]bool{}
		for _, s := range spans {
			uids[s.uid] = true
			end = max(end, s.start)
			if s.end != math.MaxInt64 {
				end = max(end, s.end)
			}
		}
		pa.UIDs = len(uids)
		want := wanted.of(pet)
		pa.WantedWall = time.Duration(want.within(pa.FirstStart, end))

		// Sweep the runs in start order: cover is how far the runs so far
		// reach, last the one reaching furthest.
		cover, last := spans[0].end, spans[0]
		gap := func(next *span) {
			to := end
			if next != nil {
				to = next.start
			}
			for _, w := range want.intervals(cover, to) {
				o := Outage{Start: w[0], End: w[1], How: EndScaledDown}
				if w[0] == cover {
					o.Ended, o.EndedNode, o.Fenced = last.uid, last.node, last.fenced
				}
				switch {
				case w[1] == to && next != nil:
					o.How, o.Next, o.Node, o.NewUID = EndRecovered, next.uid, next.node, next.uid != last.uid
				case w[1] == to:
					o.How = EndHistory
				}
				pa.Outages = append(pa.Outages, o)
			}
		}
		for i := 1; i < len(spans); i++ {
			s := spans[i]
			if s.start > cover {
				gap(&s)
			}
			if s.end > cover {
				cover, last = s.end, s
			}
		}
		if cover < end {
			gap(nil)
		}
		for _, o := range pa.Outages {
			d := time.Duration(o.End - o.Start)
			pa.UnavailableWall += d
			pa.LongestWall = max(pa.LongestWall, d)
		}
		pa.Wanted = rep.scaled(pa.WantedWall)
		pa.Unavailable = rep.scaled(pa.UnavailableWall)
		pa.Longest = rep.scaled(pa.LongestWall)
		rep.Pets = append(rep.Pets, pa)
	}

	for _, iv := range h.Nemesis {
		fr := FaultRecovery{Fault: iv}
		for _, pa := range rep.Pets {
			for _, o := range pa.Outages {
				if o.Ended == "" || o.Start < iv.Start || o.Start > iv.End {
					continue
				}
				pr := PetRecovery{Pet: pa.Pet, Down: o.Start, How: o.How, DowntimeWall: time.Duration(o.End - o.Start)}
				pr.Downtime = rep.scaled(pr.DowntimeWall)
				if o.How == EndRecovered {
					pr.TTRWall = time.Duration(o.End - iv.Start)
					pr.TTR = rep.scaled(pr.TTRWall)
					pr.Next, pr.Node = o.Next, o.Node
				}
				fr.Pets = append(fr.Pets, pr)
			}
		}
		rep.Faults = append(rep.Faults, fr)
	}
	return rep, true
}

// scaled converts a recorder duration to the cluster's scaled clock.
func (r RecoveryReport) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * r.Scale)
}

// ledgerScale estimates how much faster the cluster's scaled clock runs than
// the recorder's: per node, the scaled time elapsed between its first and
// last ledger entries over the recorder time elapsed, and the median over
// the nodes (a node whose clock a fault skewed is outvoted). It is 1 when
// no node's entries span a millisecond.
func ledgerScale(ledger []history.LedgerEntry) float64 {
	type ends struct{ first, last int }
	byNode := map[string]*ends{}
	var cur *ends // consecutive entries are mostly of one node
	for i := range ledger {
		e := &ledger[i]
		if cur == nil || ledger[cur.last].Node != e.Node {
			cur = byNode[e.Node]
			if cur == nil {
				cur = &ends{i, i}
				byNode[e.Node] = cur
			}
		}
		cur.last = i
	}
	var slopes []float64
	for _, b := range byNode {
		first, last := &ledger[b.first], &ledger[b.last]
		dt := last.T - first.T
		ds := last.Scaled.Sub(first.Scaled)
		if dt >= int64(time.Millisecond) && ds > 0 {
			slopes = append(slopes, float64(ds)/float64(dt))
		}
	}
	if len(slopes) == 0 {
		return 1
	}
	slices.Sort(slopes)
	return slopes[len(slopes)/2]
}

// replicasHistory is, per StatefulSet (namespace/name), its spec.replicas
// as the store recorded it over time.
type replicasHistory map[string][]replicasAt

type replicasAt struct {
	t        int64
	replicas int64 // -1 once the set is deleted
}

// setReplicas reads the StatefulSets' replicas from the store's changes.
func setReplicas(store []history.StoreEvent) replicasHistory {
	out := replicasHistory{}
	for _, ev := range store {
		if ev.Resource != "statefulsets.apps" && ev.Resource != "statefulsets" {
			continue
		}
		key := podRef(ev.Namespace, ev.Name)
		n := int64(-1)
		if ev.Type != history.StoreDeleted {
			var set struct {
				Spec struct {
					Replicas *int64 `json:"replicas"`
				} `json:"spec"`
			}
			if json.Unmarshal(ev.Object, &set) != nil {
				continue
			}
			n = 1 // the API's default
			if set.Spec.Replicas != nil {
				n = *set.Spec.Replicas
			}
		}
		out[key] = append(out[key], replicasAt{t: ev.T, replicas: n})
	}
	return out
}

// wantedFn says when one pet is wanted: a sorted list of the times its
// wanted state changes, starting with its state from the beginning.
type wantedFn struct {
	always  bool
	changes []int64 // times at which wanted flips; wanted before the first is initial
	initial bool
}

// of is the wanted function of a pet (namespace/<set>-<ordinal>).
func (rh replicasHistory) of(pet string) wantedFn {
	i := strings.LastIndexByte(pet, '-')
	if i < 0 {
		return wantedFn{always: true}
	}
	ord, err := strconv.ParseInt(pet[i+1:], 10, 64)
	hist := rh[pet[:i]]
	if err != nil || len(hist) == 0 {
		return wantedFn{always: true}
	}
	// Before the set's first record the pet cannot have run, so the
	// initial state only matters to a history that lost that record.
	w := wantedFn{initial: true}
	cur := w.initial
	for _, r := range hist {
		now := r.replicas > ord
		if now != cur {
			w.changes = append(w.changes, r.t)
			cur = now
		}
	}
	return w
}

// intervals returns the parts of [from, to) during which the pet is wanted.
func (w wantedFn) intervals(from, to int64) [][2]int64 {
	if from >= to {
		return nil
	}
	if w.always {
		return [][2]int64{{from, to}}
	}
	var out [][2]int64
	cur := w.initial
	start := from
	for _, c := range w.changes {
		if c >= to {
			break
		}
		if c > from {
			if cur {
				out = append(out, [2]int64{start, c})
			}
			start = c
		}
		cur = !cur
	}
	if cur {
		out = append(out, [2]int64{start, to})
	}
	return out
}

// within is the total wanted time in [from, to).
func (w wantedFn) within(from, to int64) int64 {
	var d int64
	for _, iv := range w.intervals(from, to) {
		d += iv[1] - iv[0]
	}
	return d
}

// faultRef names a fault for figures: its name and ID.
func faultRef(iv history.Interval) string {
	if iv.ID == 0 {
		return iv.Name + "@" + nanos(iv.Start)
	}
	return fmt.Sprintf("%s#%d", iv.Name, iv.ID)
}

// RecoveryFigures renders a recovery report as figures for Result.Figures,
// on the scaled clock: per pet its unavailable time, availability and
// longest outage, and whether it was down at the end; per fault and pet the
// time to recovery and the pet's own downtime, or a "not recovered" count of
// 1 for a pet that never came back (a pet its set stopped wanting is left
// out); per fault the largest time to recovery.
func RecoveryFigures(r RecoveryReport) []Figure {
	var out []Figure
	for _, p := range r.Pets {
		out = append(out,
			Figure{Name: "unavailable", Key: p.Pet, Value: p.Unavailable.Seconds(), Unit: "s"},
			Figure{Name: "availability", Key: p.Pet, Value: p.Availability(), Unit: "%"},
			Figure{Name: "outages", Key: p.Pet, Value: float64(len(p.Outages)), Unit: "count"})
		if len(p.Outages) > 0 {
			out = append(out, Figure{Name: "longest outage", Key: p.Pet, Value: p.Longest.Seconds(), Unit: "s"})
			if p.Outages[len(p.Outages)-1].How == EndHistory {
				out = append(out, Figure{Name: "down at the end", Key: p.Pet, Value: 1, Unit: "count"})
			}
		}
	}
	for _, f := range r.Faults {
		fault := faultRef(f.Fault)
		var worst time.Duration
		recovered := 0
		for _, p := range f.Pets {
			switch p.How {
			case EndRecovered:
				recovered++
				worst = max(worst, p.TTR)
				out = append(out,
					Figure{Name: "time to recovery", Key: p.Pet, Value: p.TTR.Seconds(), Unit: "s", Fault: fault},
					Figure{Name: "downtime", Key: p.Pet, Value: p.Downtime.Seconds(), Unit: "s", Fault: fault})
			case EndHistory:
				out = append(out, Figure{Name: "not recovered", Key: p.Pet, Value: 1, Unit: "count", Fault: fault})
			}
		}
		if recovered > 0 {
			out = append(out, Figure{Name: "max time to recovery", Value: worst.Seconds(), Unit: "s", Fault: fault})
		}
	}
	return out
}
