package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// appendLine appends one history line to dst: {"kind":…,"t":…} followed by
// body's fields (body is a JSON object, as json.Marshal writes a struct),
// and a newline. It is the line format Read reads and the Recorder writes.
func appendLine(dst []byte, kind Kind, t int64, body []byte) []byte {
	dst = append(dst, `{"kind":`...)
	dst = strconv.AppendQuote(dst, string(kind))
	dst = append(dst, `,"t":`...)
	dst = strconv.AppendInt(dst, t, 10)
	if len(body) > 2 {
		dst = append(dst, ',')
		dst = append(dst, body[1:]...)
	} else {
		dst = append(dst, '}')
	}
	return append(dst, '\n')
}

// Encode writes h back out as history lines that Read loads as h: the meta
// line at h's end time (so that End survives, no line's time passing it),
// each operation as an invoke
// line and, unless its outcome is unknown, a complete line, each fault as
// a start and an end line (the unhealed ones last, so that no end closes
// them), every other event at its own time, the lines of unknown kinds as
// they were, and the closing record when h is complete. Tools that rewrite
// a history (and tests that need one) use it; a run's history is written
// by the Recorder.
func Encode(h *History) ([]byte, error) {
	var buf []byte
	var err error
	line := func(kind Kind, t int64, payload any) {
		if err != nil {
			return
		}
		body, merr := json.Marshal(payload)
		if merr != nil {
			err = fmt.Errorf("encoding %s event: %w", kind, merr)
			return
		}
		buf = appendLine(buf, kind, t, body)
	}
	line(KindMeta, h.End, h.Meta)
	for _, op := range h.Ops {
		// An operation's times are in its record; its lines' own times
		// never pass the end.
		line(KindInvoke, min(op.Invoke, h.End), op)
		if op.Status != StatusUnknown && op.Status != "" {
			line(KindComplete, min(op.Return, h.End), op)
		}
	}
	for _, c := range h.API {
		line(KindAPI, c.T, c)
	}
	event := func(in Interval, phase NemesisPhase, wall time.Time) NemesisEvent {
		return NemesisEvent{ID: in.ID, Name: in.Name, Description: in.Description, Phase: phase, Targets: in.Targets,
			Effect: in.Effect, Links: in.Links, Components: in.Components, Nodes: in.Nodes, Params: in.Params, Wall: wall}
	}
	for _, in := range h.Nemesis {
		if in.Healed {
			line(KindNemesis, in.Start, event(in, PhaseStart, in.StartWall))
			line(KindNemesis, in.End, event(in, PhaseEnd, in.EndWall))
		}
	}
	for _, in := range h.Nemesis {
		if !in.Healed {
			line(KindNemesis, in.Start, event(in, PhaseStart, in.StartWall))
		}
	}
	for _, e := range h.Ledger {
		line(KindLedger, e.T, e)
	}
	for _, e := range h.Store {
		line(KindStore, e.T, e)
	}
	for _, e := range h.Logs {
		line(KindLog, e.T, e)
	}
	for _, e := range h.Watch {
		line(KindWatch, e.T, e)
	}
	for _, e := range h.Other {
		buf = append(buf, bytes.TrimSpace(e.Raw)...)
		buf = append(buf, '\n')
	}
	if h.Complete {
		line(KindEnd, h.End, h.Closing)
	}
	return buf, err
}
