package checker

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/podsafe/podsafe/history"
)

// view is one history decoded once and indexed: what the checkers of one
// Check read, so that no two of them decode the same store event or walk
// the same calls again. Each part (the pods by UID and key, the nodes, the
// container runs, the pod creators, the scheduler's objects, the
// validation, …) is built once, on first use or when Check warms the parts
// a checker that applies reads, the checkers that need it waiting for it,
// and never changes after: checkers read a view concurrently. A part's build
// runs in a goroutine of its own, bounded by the view's context (Check's,
// cancelled when Check returns), so that a checker whose own time runs out
// stops waiting and answers Unknown while the build goes on for the others.
type view struct {
	h   *history.History
	ctx context.Context

	mu    sync.Mutex
	built []partTime

	podPart     part[*podIndex]
	nodePart    part[*nodeIndex]
	runPart     part[[]run]
	creatorPart part[*podCreators]
	schedPart   part[*schedObjects]
	assumeParts [len(validations)]part[*assumptions]

	// watched holds the committed history of each watched set, built on
	// first use under watchMu.
	watchMu sync.Mutex
	watched map[watchSet]*committed
}

// partTime is how long building one part of a view took.
type partTime struct {
	name string
	took time.Duration
}

// newView returns the view of h whose parts are built under ctx. It
// decodes nothing yet.
func newView(ctx context.Context, h *history.History) *view {
	return &view{h: h, ctx: ctx}
}

// partTimes returns how long each part built so far took, in the order
// they were built.
func (v *view) partTimes() []partTime {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]partTime(nil), v.built...)
}

// part is one piece of a view, built once on first use.
type part[T any] struct {
	once sync.Once
	done chan struct{}
	val  T
	ok   bool
	// crash is what the build panicked with; every reader panics with it
	// in turn, so that each checker needing the part reports the bug.
	crash *partCrash
}

// partCrash is a panic of a part's build, with the stack where it
// happened.
type partCrash struct {
	part  string
	value any
	stack []byte
}

func (c *partCrash) String() string {
	return fmt.Sprintf("building the shared %s: %v\n\n%s", c.part, c.value, c.stack)
}

// get returns the part, building it with build on first use. It waits for
// the build as long as ctx allows; ok is false when ctx ended first or the
// build was cancelled (build reports false when the view's context ended).
func (p *part[T]) get(ctx context.Context, v *view, name string, build func(context.Context) (T, bool)) (val T, ok bool) {
	p.once.Do(func() {
		p.done = make(chan struct{})
		go func() {
			defer close(p.done)
			defer func() {
				if r := recover(); r != nil {
					p.crash = &partCrash{part: name, value: r, stack: debug.Stack()}
				}
			}()
			start := time.Now()
			p.val, p.ok = build(v.ctx)
			took := time.Since(start)
			v.mu.Lock()
			v.built = append(v.built, partTime{name: name, took: took})
			v.mu.Unlock()
		}()
	})
	select {
	case <-p.done:
	default:
		select {
		case <-p.done:
		case <-ctx.Done():
			return val, false
		}
	}
	if p.crash != nil {
		panic(p.crash)
	}
	return p.val, p.ok
}

// runs returns the ledger's container runs (containerRuns).
func (v *view) runs(ctx context.Context) ([]run, bool) {
	return v.runPart.get(ctx, v, "container runs", func(context.Context) ([]run, bool) { return containerRuns(v.h.Ledger), true })
}

// creators returns who created which pod, from the API history
// (newPodCreators).
func (v *view) creators(ctx context.Context) (*podCreators, bool) {
	return v.creatorPart.get(ctx, v, "pod creators", func(context.Context) (*podCreators, bool) { return newPodCreators(v.h.API), true })
}

// standaloneView returns a view of h for one checker called on its own
// (CheckPhases, …), and the function that stops what it still builds.
func standaloneView(ctx context.Context, h *history.History) (*view, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	return newView(ctx, h), cancel
}

// viewPart names a part of the view, for warm.
type viewPart int

// The parts of the view a checker may read (besides the validation).
const (
	partPods viewPart = iota
	partNodes
	partRuns
	partCreators
	// partSchedAll: the scheduler's objects, every one decoded.
	partSchedAll
)

// warm starts building the given parts, and the validation of the given
// assumptions, without waiting for them: the checkers that read them then
// find them built, or under way, rather than build them one after the
// other when each first asks.
func (v *view) warm(parts []viewPart, assumes []assumption) {
	for _, p := range parts {
		go func() {
			// A build that crashes crashes again for each checker that
			// reads the part, which reports it (check-safe).
			defer func() { _ = recover() }()
			switch p {
			case partPods:
				v.pods(v.ctx)
			case partNodes:
				v.nodes(v.ctx)
			case partRuns:
				v.runs(v.ctx)
			case partCreators:
				v.creators(v.ctx)
			case partSchedAll:
				if objs, ok := v.schedObjects(v.ctx); ok {
					objs.decodeAll(v.ctx)
				}
			}
		}()
	}
	if len(assumes) > 0 {
		go func() {
			defer func() { _ = recover() }()
			v.assumptions(v.ctx, assumes)
		}()
	}
}
