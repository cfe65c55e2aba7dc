package report

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
)

// Limits that keep report.html fast on big histories. The page says when one
// of them cut something.
const (
	// timelineBuckets is the number of buckets op and API rates are
	// aggregated into.
	timelineBuckets = 240
	// maxGanttRows bounds the rows of the ledger Gantt chart.
	maxGanttRows = 300
	// maxFaultBands bounds the fault bands drawn.
	maxFaultBands = 2000
	// maxMarks bounds the TERM/KILL/refused-write marks drawn.
	maxMarks = 5000
)

// Geometry of the SVG charts, in viewBox units.
const (
	svgWidth   = 1200.0
	svgLeft    = 170.0
	svgRight   = 10.0
	laneHeight = 18.0
	chartH     = 60.0
	axisH      = 22.0
	sectionGap = 14.0
)

var palette = []string{
	"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
	"#ff9da7", "#9c755f", "#e15759", "#bab0ac", "#1f77b4", "#8c564b",
}

// colorOf picks a stable colour for a name.
func colorOf(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return palette[h.Sum32()%uint32(len(palette))]
}

// svgRect is a rectangle with a tooltip.
type svgRect struct {
	X, Y, W, H float64
	Fill       string
	Title      string
	Label      string
	Class      string
	// Key groups rectangles the page highlights together (a pod UID).
	Key string
}

// svgLine is a line with a tooltip.
type svgLine struct {
	X1, Y1, X2, Y2 float64
	Class          string
	Title          string
}

// svgText is a label.
type svgText struct {
	X, Y   float64
	Text   string
	Anchor string
	Class  string
}

// chart is one SVG drawing.
type chart struct {
	Height float64
	// Under are drawn first, beneath everything else.
	Under []svgRect
	Rects []svgRect
	Lines []svgLine
	Texts []svgText
}

// Width is the viewBox width of every chart.
func (chart) Width() float64 { return svgWidth }

// axis maps history times to x.
type axis struct {
	end int64
}

func (a axis) x(t int64) float64 {
	if a.end <= 0 {
		return svgLeft
	}
	if t < 0 {
		t = 0
	}
	if t > a.end {
		t = a.end
	}
	return svgLeft + (svgWidth-svgLeft-svgRight)*float64(t)/float64(a.end)
}

// ticks draws the time axis at y with grid lines down to bottom.
func (a axis) ticks(c *chart, y, bottom float64) {
	c.Lines = append(c.Lines, svgLine{X1: svgLeft, Y1: y, X2: svgWidth - svgRight, Y2: y, Class: "axis"})
	if a.end <= 0 {
		return
	}
	secs := float64(a.end) / 1e9
	step := niceStep(secs / 10)
	for s := 0.0; s <= secs+1e-9; s += step {
		x := a.x(int64(s * 1e9))
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: y, X2: x, Y2: bottom, Class: "grid"})
		c.Texts = append(c.Texts, svgText{X: x, Y: y - 6, Text: trimFloat(s) + "s", Anchor: "middle", Class: "tick"})
	}
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.3f", f)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// timeline is the fault and rate chart of a run.
type timeline struct {
	Chart     chart
	Faults    int
	Lanes     int
	OpsMax    int
	APIMax    int
	BucketSec float64
	Capped    []string
}

// buildTimeline draws the fault bands per target, the client op rate and
// the API call outcomes per bucket, and the violation marks.
func buildTimeline(h *history.History, r *Results) timeline {
	a := axis{end: h.End}
	var tl timeline
	c := &tl.Chart
	y := axisH
	a.ticks(c, y, 0) // bottom fixed below
	y += 6

	// Fault lanes: one per target, in name order; faults without targets
	// go in a "cluster" lane.
	lanes := map[string]bool{}
	for _, iv := range h.Nemesis {
		for _, t := range targetsOf(iv) {
			lanes[t] = true
		}
	}
	var names []string
	for l := range lanes {
		names = append(names, l)
	}
	sort.Strings(names)
	laneY := map[string]float64{}
	if len(names) > 0 {
		c.Texts = append(c.Texts, svgText{X: 4, Y: y + 12, Text: "faults by target", Class: "section"})
		y += laneHeight
	}
	for i, n := range names {
		laneY[n] = y
		if i%2 == 0 {
			c.Rects = append(c.Rects, svgRect{X: svgLeft, Y: y, W: svgWidth - svgLeft - svgRight, H: laneHeight, Class: "lane"})
		}
		c.Texts = append(c.Texts, svgText{X: svgLeft - 6, Y: y + 13, Text: n, Anchor: "end", Class: "lanelabel"})
		y += laneHeight
	}
	tl.Lanes = len(names)
	drawn := 0
	for _, iv := range h.Nemesis {
		for _, t := range targetsOf(iv) {
			if drawn >= maxFaultBands {
				break
			}
			drawn++
			x1, x2 := a.x(iv.Start), a.x(iv.End)
			w := math.Max(x2-x1, 1.5)
			title := fmt.Sprintf("%s on %s: %s → %s", iv.Name, t, fmtT(iv.Start), fmtT(iv.End))
			if iv.Description != "" {
				title += " — " + iv.Description
			}
			if p := iv.ParamString(); p != "" {
				title += " (" + p + ")"
			}
			if !iv.Healed {
				title += " (never healed)"
			}
			label := ""
			switch {
			case iv.Description != "" && w > float64(len(iv.Description))*5.6+8:
				label = iv.Description
			case w > float64(len(iv.Name))*5.6+8:
				label = iv.Name
			}
			cls := "fault"
			if !iv.Healed {
				cls += " unhealed"
			}
			c.Rects = append(c.Rects, svgRect{X: x1, Y: laneY[t] + 2, W: w, H: laneHeight - 4, Fill: colorOf(iv.Name), Title: title, Label: label, Class: cls})
		}
	}
	tl.Faults = len(h.Nemesis)
	if drawn >= maxFaultBands {
		tl.Capped = append(tl.Capped, fmt.Sprintf("fault bands: the first %d of %d drawn", maxFaultBands, countBands(h)))
	}

	// Op rate and API outcomes, stacked per bucket.
	n := timelineBuckets
	bucket := func(t int64) int {
		if h.End <= 0 {
			return 0
		}
		i := int(float64(t) / float64(h.End) * float64(n))
		return min(max(i, 0), n-1)
	}
	if h.End > 0 {
		tl.BucketSec = float64(h.End) / 1e9 / float64(n)
	}
	if len(h.Ops) > 0 {
		counts := make([][3]int, n)
		for _, op := range h.Ops {
			counts[bucket(op.Invoke)][statusIndex(op.Status)]++
		}
		y += sectionGap
		tl.OpsMax = stacked(c, a, counts, y, "client ops", "ops invoked")
		y += chartH
	}
	if len(h.API) > 0 {
		counts := make([][3]int, n)
		for _, call := range h.API {
			counts[bucket(call.Invoke)][statusIndex(call.Outcome)]++
		}
		y += sectionGap
		tl.APIMax = stacked(c, a, counts, y, "API calls", "API calls")
		y += chartH
	}

	// Fault periods shaded behind the charts, so rates read against them.
	for _, iv := range h.Nemesis {
		if drawn >= maxFaultBands*2 {
			break
		}
		drawn++
		x1, x2 := a.x(iv.Start), a.x(iv.End)
		c.Under = append(c.Under, svgRect{X: x1, Y: axisH, W: math.Max(x2-x1, 1), H: y - axisH, Fill: colorOf(iv.Name), Class: "shade"})
	}
	for _, v := range violations(h, r) {
		x := a.x(v.t)
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: axisH, X2: x, Y2: y, Class: "violation", Title: v.title})
	}
	// The grid lines run to the bottom.
	for i := range c.Lines {
		if c.Lines[i].Class == "grid" {
			c.Lines[i].Y2 = y
		}
	}
	c.Height = y + 4
	return tl
}

func countBands(h *history.History) int {
	n := 0
	for _, iv := range h.Nemesis {
		n += len(targetsOf(iv))
	}
	return n
}

// targetsOf is the lanes a fault is drawn in.
func targetsOf(iv history.Interval) []string {
	if len(iv.Targets) == 0 {
		return []string{"(cluster)"}
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range iv.Targets {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func statusIndex(s history.Status) int {
	switch s {
	case history.StatusOK:
		return 0
	case history.StatusFail:
		return 1
	}
	return 2
}

var statusClass = [3]string{"ok", "fail", "unknown"}

// stacked draws counts as stacked bars of height chartH at y and returns the
// largest bucket total.
func stacked(c *chart, a axis, counts [][3]int, y float64, label, what string) int {
	peak := 0
	for _, b := range counts {
		peak = max(peak, b[0]+b[1]+b[2])
	}
	c.Texts = append(c.Texts,
		svgText{X: 4, Y: y + 12, Text: label, Class: "section"},
		svgText{X: svgLeft - 6, Y: y + 10, Text: fmt.Sprintf("%d", peak), Anchor: "end", Class: "tick"},
		svgText{X: svgLeft - 6, Y: y + chartH, Text: "0", Anchor: "end", Class: "tick"})
	c.Lines = append(c.Lines, svgLine{X1: svgLeft, Y1: y + chartH, X2: svgWidth - svgRight, Y2: y + chartH, Class: "axis"})
	if peak == 0 {
		return 0
	}
	n := len(counts)
	bw := (svgWidth - svgLeft - svgRight) / float64(n)
	for i, b := range counts {
		total := b[0] + b[1] + b[2]
		if total == 0 {
			continue
		}
		x := svgLeft + bw*float64(i)
		base := y + chartH
		t0 := int64(float64(a.end) * float64(i) / float64(n))
		title := fmt.Sprintf("%s from %s: %d ok, %d failed, %d unknown", what, fmtT(t0), b[0], b[1], b[2])
		for k := 0; k < 3; k++ {
			if b[k] == 0 {
				continue
			}
			hgt := chartH * float64(b[k]) / float64(peak)
			base -= hgt
			c.Rects = append(c.Rects, svgRect{X: x, Y: base, W: math.Max(bw-0.3, 0.5), H: hgt, Class: "bar " + statusClass[k], Title: title})
		}
	}
	return peak
}

// evidenceTime is the earliest time an evidence item names.
func evidenceTime(e checker.Evidence, start time.Time) (int64, bool) {
	best, ok := int64(math.MaxInt64), false
	for _, o := range e.Ops {
		best, ok = min(best, o.Invoke), true
	}
	for _, l := range e.Ledger {
		best, ok = min(best, ledgerT(l, start)), true
	}
	for _, c := range e.API {
		best, ok = min(best, c.Invoke), true
	}
	return best, ok
}

// ledgerT is the history time of a ledger entry. Entries read back from
// results.json lost theirs, so it is derived from the wall time.
func ledgerT(l history.LedgerEntry, start time.Time) int64 {
	if l.T != 0 || l.Wall.IsZero() || start.IsZero() {
		return l.T
	}
	return int64(l.Wall.Sub(start))
}

// violation is the earliest time of one Illegal evidence item.
type violation struct {
	t     int64
	title string
}

// violations lists, for every Illegal evidence item that names a time, its
// earliest time and a description.
func violations(h *history.History, r *Results) []violation {
	if r == nil {
		return nil
	}
	var out []violation
	for _, ch := range r.Checks {
		if ch.Verdict != checker.Illegal {
			continue
		}
		for _, e := range ch.Evidence {
			if e.Expected {
				continue
			}
			t, ok := evidenceTime(e, h.Meta.Start)
			if !ok {
				continue
			}
			desc := e.Description
			if e.Key != "" {
				desc = e.Key + ": " + desc
			}
			out = append(out, violation{t: t, title: ch.Checker + " at " + fmtT(t) + ": " + desc})
		}
	}
	return out
}
