// Package marker is parsed, never built, by the mutation tests: a planted
// bug inside a failpoint marker's function, and the same operator outside.
package marker

import (
	"context"

	"github.com/pingcap/failpoint"
)

func grace(ctx context.Context, d, spec int64) int64 {
	g := d
	failpoint.InjectContext(ctx, "useSpec", func() {
		if d > 0 && spec > 0 {
			g = spec
		}
	})
	if d > spec {
		g = spec
	}
	return pick(d > 1, g)
}

// pick is a plain function: a call of it is no marker.
func pick(b bool, g int64) int64 {
	if b {
		return g
	}
	return 0
}
