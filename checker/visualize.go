package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/podsafe/podsafe/history"
)

// Colours of the annotation bands in the visualization.
const (
	faultColor   = "#f6d5d5"
	harnessColor = "#e3e8f4"
)

// WriteVisualization checks the register operations of h, as CheckRegister
// does, and writes porcupine's self-contained HTML view of the result to
// path: each key's operations and the linearization found (or the longest
// legal prefixes, when there is none), with h's faults as bands and its
// harness notes as marks. It returns the check's Result, so a caller that
// wants both pays for one check.
func WriteVisualization(ctx context.Context, path string, h *history.History, opts Options) (Result, error) {
	res, run := searchRegister(ctx, h.Ops, opts, opts.maxSearchMemory(), true)
	run.info.AddAnnotations(Annotations(h))
	if err := porcupine.VisualizePath(registerPtrModel, run.info, path); err != nil {
		return res, fmt.Errorf("writing visualization %s: %w", path, err)
	}
	return res, nil
}

// Annotations renders h's nemesis intervals as bands, one row per fault
// name, and its log notes as point marks, in the history's time base.
func Annotations(h *history.History) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, iv := range h.Nemesis {
		var details []string
		if iv.Description != "" {
			details = append(details, iv.Description)
		}
		if len(iv.Targets) > 0 {
			details = append(details, "targets: "+strings.Join(iv.Targets, ", "))
		}
		if p := iv.ParamString(); p != "" {
			details = append(details, p)
		}
		if !iv.Healed {
			details = append(details, "never healed")
		}
		out = append(out, porcupine.Annotation{
			Tag:             "nemesis: " + iv.Name,
			Start:           iv.Start,
			End:             iv.End,
			Description:     iv.Name,
			Details:         strings.Join(details, "; "),
			BackgroundColor: faultColor,
		})
	}
	for _, l := range h.Logs {
		out = append(out, porcupine.Annotation{
			Tag:             "harness",
			Start:           l.T,
			Description:     l.Msg,
			Details:         formatAttrs(l.Attrs),
			BackgroundColor: harnessColor,
		})
	}
	return out
}

func formatAttrs(attrs map[string]string) string {
	if len(attrs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + attrs[k]
	}
	return strings.Join(parts, " ")
}
