// Package fpctx aims pingcap/failpoint failpoints at one component.
//
// pingcap/failpoint's failpoints are process-global: enabled, a marker fires
// wherever it runs, and the embedded cluster runs every store member,
// kubelet and controller in one process. Every podsafe marker is therefore
// a failpoint.InjectContext whose context carries the identity of the
// component that reached it (With, For) and this package's hook. The hook
// lets the failpoint through only where it is aimed (Aim): at one component,
// or, unaimed, everywhere.
//
// Identities are the embedded cluster's component names: a store member's
// raft ID ("cp-0"), which its API server shares, Kubelet(node),
// Controller(name), Scheduler, Storage. A context without this package's
// hook never lets a failpoint fire (pingcap/failpoint refuses it), so every
// marker must be given one.
//
// In a failpoint build the aims can also be set for a whole process at
// start, beside GO_FAILPOINTS: PODSAFE_FAILPOINT_AIMS="name=component;…"
// with a failpoint's full name.
//
// The package imports only the standard library and pingcap/failpoint, so
// that every component may use it. Every function is safe for concurrent
// use.
package fpctx

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pingcap/failpoint"
)

// Identities of the components that are one of a kind.
const (
	// Scheduler is the scheduler's identity.
	Scheduler = "scheduler"
	// Storage is the shared storage server's identity.
	Storage = "storage"
	// Unnamed is the identity of code that does not know its component: a
	// failpoint reached there fires only when unaimed.
	Unnamed = ""
)

// Kubelet is the identity of node's kubelet.
func Kubelet(node string) string { return "kubelet/" + node }

// Controller is the identity of the controller called name ("pet",
// "node-lifecycle", "fencing", …).
func Controller(name string) string { return "controller/" + name }

type componentKey struct{}

// With returns ctx carrying component as the identity failpoint markers
// reached under it see, and the hook that honours aims.
func With(ctx context.Context, component string) context.Context {
	return failpoint.WithHook(context.WithValue(ctx, componentKey{}, component), hook)
}

var contexts sync.Map // component -> context.Context

// For returns a background context carrying component, as With does. The
// context is made once per component, so a marker on a hot path may ask for
// it on every call.
func For(component string) context.Context {
	if c, ok := contexts.Load(component); ok {
		return c.(context.Context)
	}
	c, _ := contexts.LoadOrStore(component, With(context.Background(), component))
	return c.(context.Context)
}

// Component is the identity ctx carries; Unnamed if none.
func Component(ctx context.Context) string {
	c, _ := ctx.Value(componentKey{}).(string)
	return c
}

// aim is one failpoint's target; gen tells an undo whether the aim is still
// the one it set.
type aim struct {
	component string
	gen       uint64
}

var (
	mu    sync.RWMutex
	aims  = map[string]aim{} // failpoint full name -> aim
	gen   uint64
	fired sync.Map // firedKey -> *atomic.Uint64
)

type firedKey struct{ name, component string }

// Aim aims the failpoint name (its full name) at component: its markers let
// it through only in contexts carrying that identity. An empty component
// aims it everywhere again. undo restores the aim Aim replaced, unless the
// aim was changed since.
func Aim(name, component string) (undo func()) {
	mu.Lock()
	defer mu.Unlock()
	prev, had := aims[name]
	gen++
	mine := gen
	aims[name] = aim{component: component, gen: mine}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if aims[name].gen != mine {
			return
		}
		if had {
			aims[name] = prev
		} else {
			delete(aims, name)
		}
	}
}

// Enable switches the failpoint name (its full name) on with term, aimed at
// component (empty: everywhere), in one step a marker cannot see halfway: a
// marker evaluated meanwhile sees the failpoint either off or on and aimed,
// never on and still unaimed. heal switches it off and restores the aim
// Enable replaced, again in one step.
func Enable(name, term, component string) (heal func() error, err error) {
	mu.Lock()
	defer mu.Unlock()
	prev, had := aims[name]
	if err := failpoint.Enable(name, term); err != nil {
		return nil, err
	}
	gen++
	mine := gen
	aims[name] = aim{component: component, gen: mine}
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		err := failpoint.Disable(name)
		if aims[name].gen == mine {
			if had {
				aims[name] = prev
			} else {
				delete(aims, name)
			}
		}
		return err
	}, nil
}

// Aimed is the component name is aimed at; empty when it is unaimed.
func Aimed(name string) string {
	mu.RLock()
	defer mu.RUnlock()
	return aims[name].component
}

// Fired counts the evaluations of the failpoint name that its hook let
// through, in contexts carrying component, while it was enabled: how often
// it fired there (a term such as "50%return" may still decline).
func Fired(name, component string) uint64 {
	if n, ok := fired.Load(firedKey{name, component}); ok {
		return n.(*atomic.Uint64).Load()
	}
	return 0
}

// hook is the failpoint.Hook of every context With makes: it lets name
// through where it is unaimed or aimed at the context's component. It runs
// only in a failpoint build, where markers evaluate.
//
// The aim and whether the failpoint is on are read under one lock, which
// Enable holds while it changes both, so a marker evaluated while a
// failpoint is switched on aimed elsewhere cannot see it on but not yet
// aimed. A failpoint that is off is filtered here (its evaluation would
// decline anyway), so one switched on after this hook ran is not let
// through by it.
func hook(ctx context.Context, name string) bool {
	comp := Component(ctx)
	mu.RLock()
	a, ok := aims[name]
	_, err := failpoint.Status(name)
	mu.RUnlock()
	if err != nil || (ok && a.component != "" && a.component != comp) {
		return false
	}
	n, loaded := fired.Load(firedKey{name, comp})
	if !loaded {
		n, _ = fired.LoadOrStore(firedKey{name, comp}, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
	return true
}

// EnvAims names the variable holding the aims a process starts with.
const EnvAims = "PODSAFE_FAILPOINT_AIMS"

func init() {
	if err := aimFromEnv(os.Getenv(EnvAims)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// aimFromEnv sets the aims of s, "name=component;…".
func aimFromEnv(s string) error {
	for _, term := range strings.Split(s, ";") {
		if strings.TrimSpace(term) == "" {
			continue
		}
		name, comp, ok := strings.Cut(term, "=")
		if !ok || name == "" {
			return fmt.Errorf("%s: %q is not name=component (the failpoint's full name, then the component's identity)", EnvAims, term)
		}
		Aim(strings.TrimSpace(name), strings.TrimSpace(comp))
	}
	return nil
}
