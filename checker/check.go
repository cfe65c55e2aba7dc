package checker

import (
	"context"
	"slices"

	"github.com/podsafe/podsafe/history"
)

// Info describes one checker for listings.
type Info struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Guarantees  []string `json:"guarantees"`
}

// Catalog lists the checkers Check may run, in the order it runs them.
func Catalog() []Info {
	return []Info{{
		Name:        RegisterChecker,
		Description: "register workload operations are linearizable, key by key (porcupine)",
		Guarantees:  []string{GuaranteeStoreLin},
	}}
}

// Check runs every checker that applies to h and returns their results in
// Catalog order: the register checker when h holds register operations. It
// is bounded (see Options) and reads h without changing it; its only effect
// is the visualization file when opts.VisualizationPath is set, whose
// failure is noted in the register result's Summary without changing the
// verdict. Combine the verdicts with Merge.
func Check(ctx context.Context, h *history.History, opts Options) []Result {
	var results []Result
	if slices.ContainsFunc(h.Ops, IsRegisterOp) {
		var res Result
		if opts.VisualizationPath != "" {
			var err error
			if res, err = WriteVisualization(ctx, opts.VisualizationPath, h, opts); err != nil {
				res.Summary += "; " + err.Error()
			}
		} else {
			res = CheckRegister(ctx, h.Ops, opts)
		}
		results = append(results, res)
	}
	return results
}
