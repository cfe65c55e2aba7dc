package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis/fpprobe"
	"github.com/podsafe/podsafe/target"
)

// Failpoint is one pingcap/failpoint marker in podsafe's code that the
// nemesis may switch on at run time, aimed at one component. Markers do
// nothing unless this is a failpoint build (compiled through
// failpoint-toolexec: make test-failpoints, make bugzoo, make
// build-failpoints); FailpointsCompiled says whether it is.
type Failpoint struct {
	// Name is the failpoint's full name: the import path of its package,
	// a slash and the marker's name.
	Name string
	// Term is what the nemesis enables it with (pingcap/failpoint's
	// terms: "sleep(200)", "50%return(true)", …).
	Term string
	// Describe is one line for `podsafe list`.
	Describe string
	// Aims says which components the failpoint may be aimed at: those
	// whose markers carry their identity (package fpctx).
	Aims func(c target.Component) bool
}

const mod = "github.com/podsafe/podsafe/"

// The components each failpoint of Failpoints can be aimed at.
func storeMember(c target.Component) bool { return c.Role == target.RoleStore && c.Member >= 0 }
func apiServer(c target.Component) bool {
	// The embedded cluster runs each API server with its store member,
	// as one component of role store.
	return c.Role == target.RoleAPIServer || storeMember(c)
}
func kubelet(c target.Component) bool { return c.Role == target.RoleKubelet }
func queuedController(c target.Component) bool {
	// One controller, not the controller-manager that runs them all; only
	// the controllers with a work queue reach syncDelay.
	name, ok := strings.CutPrefix(c.Name, "controller/")
	return c.Role == target.RoleController && ok && name != "podgc"
}
func fencingController(c target.Component) bool { return c.Role == target.RoleFencing }

// Failpoints lists the failpoints the "failpoint" fault chooses from: faults
// of timing, each in a real code path. (Planted bugs are failpoints too, but
// they are switched on by a scenario's bugs, never by the nemesis.)
var Failpoints = []Failpoint{
	{mod + "raftstore/applyDelay", "sleep(50)", "one store member applies each committed entry 50 ms late", storeMember},
	{mod + "apiserver/requestDelay", "20%sleep(200)", "one request in five to one API server waits 200 ms before it is served", apiServer},
	{mod + "kubelet/statusPostDelay", "sleep(300)", "one kubelet posts pod status 300 ms late", kubelet},
	{mod + "controller/syncDelay", "sleep(300)", "one controller acts on what it saw 300 ms late", queuedController},
	{mod + "fencing/agentDelay", "sleep(500)", "the fencing controller's agents take 500 ms longer", fencingController},
}

// FailpointsCompiled reports whether this binary's failpoint markers are
// live (a failpoint build). When they are not, enabling a failpoint
// succeeds but nothing ever fires.
func FailpointsCompiled() bool { return fpprobe.Live() }

// failpointFault switches on one of Failpoints for a while, aimed at one
// component it can reach.
type failpointFault struct{}

func init() { register("failpoint", failpointFault{}) }

func (failpointFault) Name() string { return "failpoint" }
func (failpointFault) Describe() string {
	return "switch on a timing failpoint aimed at one component (slow store member, slow API server, late kubelet status, slow controller, slow fence agents); needs a failpoint build (make build-failpoints)"
}

func (failpointFault) Needs() []target.Capability { return []target.Capability{target.Failpoint} }

// Available only where the target switches failpoints and its markers are
// live: in an ordinary build the fault would silently do nothing. The
// failpoints are podsafe's own markers, so only a target that runs
// podsafe's components (the embedded cluster) has them.
func (failpointFault) Available(t target.Target) bool {
	_, ok := t.(target.Failpoints)
	return ok && t.Can(target.Failpoint, "") && len(aimable(t)) > 0
}

// aimable lists, for each failpoint that has any, the components of t it
// can be aimed at, in Failpoints' order and t's.
func aimable(t target.Target) []aimedFailpoint {
	var out []aimedFailpoint
	for _, fp := range Failpoints {
		var at []target.Component
		for _, c := range t.Components() {
			if fp.Aims(c) && t.Can(target.Failpoint, c.Name) {
				at = append(at, c)
			}
		}
		if len(at) > 0 {
			out = append(out, aimedFailpoint{fp, at})
		}
	}
	return out
}

type aimedFailpoint struct {
	Failpoint
	at []target.Component
}

func (failpointFault) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	fps, ok := t.(target.Failpoints)
	if !ok {
		return Injection{}, fmt.Errorf("failpoint: %w", target.ErrUnsupported)
	}
	choices := aimable(t)
	if len(choices) == 0 {
		return Injection{}, fmt.Errorf("failpoint: no component to aim at: %w", target.ErrUnsupported)
	}
	fp := choices[rng.IntN(len(choices))]
	c := fp.at[rng.IntN(len(fp.at))]
	heal, err := fps.EnableFailpoint(ctx, fp.Name, fp.Term, c.Name)
	if err != nil {
		return Injection{}, fmt.Errorf("enabling failpoint %s on %s: %w", fp.Name, c.Name, err)
	}
	params := map[string]string{history.ParamFailpoint: fp.Name, history.ParamTerm: fp.Term, history.ParamComponent: c.Name}
	if c.Member >= 0 {
		params[history.ParamMember] = strconv.Itoa(c.Member)
	}
	if c.Node != "" {
		params[history.ParamNode] = c.Node
	}
	return Injection{
		Description: fmt.Sprintf("failpoint %s=%s on %s", fp.Name, fp.Term, c.Name),
		// Targets, not Components: a slowed component is not one that was
		// stopped, cut off or moved in time, which checkers excuse.
		Targets: []string{c.Name},
		Params:  params,
		Heal:    heal,
	}, nil
}
