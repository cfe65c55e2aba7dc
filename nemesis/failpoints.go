package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/podsafe/podsafe/nemesis/fpprobe"
	"github.com/podsafe/podsafe/target"
)

// Failpoint is one pingcap/failpoint marker in podsafe's code that the
// nemesis may switch on at run time. Markers do nothing unless the sources
// were rewritten (`make failpoint-enable`, or the failpoint test targets);
// FailpointsCompiled says whether they were.
type Failpoint struct {
	// Name is the failpoint's full name: the import path of its package,
	// a slash and the marker's name.
	Name string
	// Term is what the nemesis enables it with (pingcap/failpoint's
	// terms: "sleep(200)", "50%return(true)", …).
	Term string
	// Describe is one line for `podsafe list`.
	Describe string
}

const mod = "github.com/podsafe/podsafe/"

// Failpoints lists the failpoints the "failpoint" fault chooses from: faults
// of timing, each in a real code path. (Planted bugs are failpoints too, but
// they are switched on by a scenario's bugs, never by the nemesis.)
var Failpoints = []Failpoint{
	{mod + "raftstore/applyDelay", "sleep(50)", "a store member applies each committed entry 50 ms late"},
	{mod + "apiserver/requestDelay", "20%sleep(200)", "one API request in five waits 200 ms before it is served"},
	{mod + "kubelet/statusPostDelay", "sleep(300)", "kubelets post pod status 300 ms late"},
	{mod + "controller/syncDelay", "sleep(300)", "controllers act on what they saw 300 ms late"},
	{mod + "fencing/agentDelay", "sleep(500)", "the fencing controller's agents take 500 ms longer"},
}

// FailpointsCompiled reports whether this binary's failpoint markers are
// live (its sources were rewritten by failpoint-ctl). When they are not,
// enabling a failpoint succeeds but nothing ever fires.
func FailpointsCompiled() bool { return fpprobe.Live() }

// failpointFault switches on one of Failpoints for a while.
type failpointFault struct{}

func init() { register("failpoint", failpointFault{}) }

func (failpointFault) Name() string { return "failpoint" }
func (failpointFault) Describe() string {
	return "switch on a timing failpoint (slow store apply, slow API, late kubelet status, slow controllers, slow fence agents); needs a failpoint build (make failpoint-enable)"
}

func (failpointFault) Needs() []target.Capability { return []target.Capability{target.Failpoint} }

// Available only where the target switches failpoints and its markers are
// live: in an ordinary build the fault would silently do nothing. The
// failpoints are podsafe's own markers, so only a target that runs
// podsafe's components (the embedded cluster) has them.
func (failpointFault) Available(t target.Target) bool {
	_, ok := t.(target.Failpoints)
	return ok && t.Can(target.Failpoint, "")
}

func (failpointFault) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	fp := Failpoints[rng.IntN(len(Failpoints))]
	fps, ok := t.(target.Failpoints)
	if !ok {
		return Injection{}, fmt.Errorf("failpoint %s: %w", fp.Name, target.ErrUnsupported)
	}
	heal, err := fps.EnableFailpoint(ctx, fp.Name, fp.Term)
	if err != nil {
		return Injection{}, fmt.Errorf("enabling failpoint %s: %w", fp.Name, err)
	}
	return Injection{
		Description: fmt.Sprintf("failpoint %s=%s", fp.Name, fp.Term),
		Targets:     []string{fp.Name},
		Params:      map[string]string{"failpoint": fp.Name, "term": fp.Term},
		Heal:        heal,
	}, nil
}
