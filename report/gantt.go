package report

import (
	"fmt"
	"math"
	"sort"

	"github.com/podsafe/podsafe/history"
)

// execution is one container run on one node, from the ledger: a start and
// what ended it.
type execution struct {
	Node, Namespace, Pod, UID, Container string
	Start, End                           int64
	// Ended is what stopped the run: exit, kill, power-off, or "" when it
	// was still running at the end of the history.
	Ended   history.LedgerAction
	Exit    int
	Terms   []int64
	Kills   []int64
	Writes  int
	Refused []int64
}

type execKey struct{ node, uid, pod, container string }

// executions pairs the ledger's starts with their ends, in start order.
func executions(h *history.History) []*execution {
	open := map[execKey]*execution{}
	var out []*execution
	for _, l := range h.Ledger {
		k := execKey{l.Node, l.UID, l.Pod, l.Container}
		e := open[k]
		switch l.Action {
		case history.LedgerStart:
			if e != nil { // a second start without an end: close the first
				e.End = l.T
			}
			e = &execution{Node: l.Node, Namespace: l.Namespace, Pod: l.Pod, UID: l.UID, Container: l.Container, Start: l.T, End: -1}
			open[k] = e
			out = append(out, e)
			continue
		case history.LedgerPowerOff:
			// A power-off stops every container of the node.
			for ok, oe := range open {
				if ok.node == l.Node && (l.Pod == "" || (ok.uid == l.UID && ok.pod == l.Pod)) {
					oe.End, oe.Ended = l.T, history.LedgerPowerOff
					delete(open, ok)
				}
			}
			continue
		}
		if e == nil {
			continue
		}
		switch l.Action {
		case history.LedgerTerm:
			e.Terms = append(e.Terms, l.T)
		case history.LedgerKill:
			e.Kills = append(e.Kills, l.T)
		case history.LedgerExit:
			e.End, e.Ended, e.Exit = l.T, history.LedgerExit, l.ExitCode
			if len(e.Kills) > 0 {
				e.Ended = history.LedgerKill
			}
			delete(open, k)
		case history.LedgerWrite:
			e.Writes++
		case history.LedgerWriteRefused, history.LedgerWriteStale:
			e.Refused = append(e.Refused, l.T)
		}
	}
	for _, e := range out {
		if e.End < 0 {
			e.End = h.End
		}
	}
	return out
}

// gantt is the per-node chart of pod executions.
type gantt struct {
	Chart  chart
	Runs   int
	Rows   int
	Nodes  int
	Capped string
}

// buildGantt draws one row per container run, grouped by node, coloured by
// pod UID, with TERM and KILL marks and refused writes.
func buildGantt(h *history.History, r *Results) gantt {
	a := axis{end: h.End}
	runs := executions(h)
	g := gantt{Runs: len(runs)}
	if len(runs) == 0 {
		return g
	}
	sort.SliceStable(runs, func(i, j int) bool {
		if runs[i].Node != runs[j].Node {
			return runs[i].Node < runs[j].Node
		}
		return runs[i].Start < runs[j].Start
	})
	shown := runs
	if len(shown) > maxGanttRows {
		shown = shown[:maxGanttRows]
		g.Capped = fmt.Sprintf("the Gantt chart shows %d of %d container runs (ordered by node, then start)", maxGanttRows, len(runs))
	}
	c := &g.Chart
	y := axisH
	a.ticks(c, y, 0)
	y += 6
	marks := 0
	node := ""
	for i, e := range shown {
		if e.Node != node {
			node = e.Node
			g.Nodes++
			y += 4
			c.Texts = append(c.Texts, svgText{X: 4, Y: y + 12, Text: node, Class: "section"})
			c.Lines = append(c.Lines, svgLine{X1: 0, Y1: y, X2: svgWidth - svgRight, Y2: y, Class: "nodesep"})
			y += laneHeight
		}
		if i%2 == 0 {
			c.Rects = append(c.Rects, svgRect{X: svgLeft, Y: y, W: svgWidth - svgLeft - svgRight, H: laneHeight, Class: "lane"})
		}
		label := e.Pod
		if e.Container != "" {
			label += "/" + e.Container
		}
		c.Texts = append(c.Texts, svgText{X: svgLeft - 6, Y: y + 13, Text: label, Anchor: "end", Class: "lanelabel"})
		x1, x2 := a.x(e.Start), a.x(e.End)
		ended := "still running at the end"
		switch e.Ended {
		case history.LedgerExit:
			ended = fmt.Sprintf("exit %d at %s", e.Exit, fmtT(e.End))
		case history.LedgerKill:
			ended = fmt.Sprintf("killed, exit at %s", fmtT(e.End))
		case history.LedgerPowerOff:
			ended = "power-off at " + fmtT(e.End)
		}
		title := fmt.Sprintf("%s/%s uid %s on %s: start %s, %s; %d TERM, %d KILL, %d writes, %d refused",
			e.Namespace, label, e.UID, e.Node, fmtT(e.Start), ended, len(e.Terms), len(e.Kills), e.Writes, len(e.Refused))
		cls := "run"
		if e.Ended == "" {
			cls += " open"
		}
		c.Rects = append(c.Rects, svgRect{X: x1, Y: y + 3, W: math.Max(x2-x1, 1.5), H: laneHeight - 6, Fill: colorOf(e.UID), Title: title, Class: cls, Key: e.UID})
		mark := func(t int64, cls, what string) {
			if marks >= maxMarks {
				return
			}
			marks++
			x := a.x(t)
			c.Lines = append(c.Lines, svgLine{X1: x, Y1: y + 1, X2: x, Y2: y + laneHeight - 1, Class: cls, Title: what + " " + label + " at " + fmtT(t)})
		}
		for _, t := range e.Terms {
			mark(t, "term", "TERM")
		}
		for _, t := range e.Kills {
			mark(t, "kill", "KILL")
		}
		for _, t := range e.Refused {
			mark(t, "refused", "refused write by")
		}
		if e.Ended == history.LedgerPowerOff {
			mark(e.End, "poweroff", "power-off of")
		}
		y += laneHeight
	}
	if marks >= maxMarks {
		if g.Capped != "" {
			g.Capped += "; "
		}
		g.Capped += fmt.Sprintf("only the first %d TERM/KILL/refused-write marks are drawn", maxMarks)
	}
	for i := range c.Lines {
		if c.Lines[i].Class == "grid" {
			c.Lines[i].Y2 = y
		}
	}
	// Faults that target a node shade the whole chart faintly, so runs
	// read against them.
	for i, iv := range h.Nemesis {
		if i >= maxFaultBands {
			break
		}
		x1, x2 := a.x(iv.Start), a.x(iv.End)
		c.Under = append(c.Under, svgRect{X: x1, Y: axisH, W: math.Max(x2-x1, 1), H: y - axisH, Fill: colorOf(iv.Name), Class: "shade",
			Title: iv.Name + " " + fmtT(iv.Start) + " → " + fmtT(iv.End)})
	}
	for _, v := range violations(h, r) {
		x := a.x(v.t)
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: axisH, X2: x, Y2: y, Class: "violation", Title: v.title})
	}
	g.Rows = len(shown)
	c.Height = y + 4
	return g
}
