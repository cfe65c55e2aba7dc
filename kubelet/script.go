package kubelet

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ScriptAnnotationPrefix starts the pod annotation that scripts one container
// of the simulated runtime: "podsafe.io/script.<container name>".
const ScriptAnnotationPrefix = "podsafe.io/script."

// ScriptCommand, as a container's command[0], makes the rest of the command
// the container's script (when no annotation scripts it).
const ScriptCommand = "podsafe-script"

// Script is how a simulated container behaves. It is written as
// space-separated words in the pod annotation podsafe.io/script.<container>
// or as the container command ["podsafe-script", word, ...]; an unscripted
// container runs until stopped and exits with code 143 at once on TERM.
//
// The words:
//
//	run=5s | run=forever   run this long, then exit by itself (default forever)
//	exit=N                 exit code when exiting by itself (default 0)
//	crash-loop             run=1s exit=1 unless run/exit say otherwise
//	ignore-term            TERM does nothing; only KILL stops the container
//	stop-after-term=3s     exit (code 143) this long after TERM (default at once)
//	prestop=4s | prestop=hang
//	                       the container has a preStop hook taking this long or
//	                       never ending (a spec lifecycle.preStop hook without
//	                       this word takes no time)
//	startup-after=10s      the startup probe succeeds from 10 s after start
//	liveness-fail-at=20s   the liveness probe fails from 20 s after start
//	ready-after=2s         the readiness probe succeeds from 2 s after start
//	unready-at=30s         the readiness probe fails from 30 s after start
//	mem=200Mi              the memory the container uses while running
//	write=1s               while running, write to each of the pod's RWO
//	                       volumes this often (through the node's network to
//	                       the storage server, carrying the attachment token)
//
// Probes are consulted only for probes the container spec declares (their
// handler is ignored); a probe the script says nothing about succeeds.
type Script struct {
	Run           time.Duration // 0 with Forever false: exit at once
	Forever       bool
	Exit          int
	IgnoreTerm    bool
	StopAfterTerm time.Duration
	HasPreStop    bool
	PreStop       time.Duration
	PreStopHang   bool
	StartupAfter  time.Duration
	LivenessFail  time.Duration // 0: never
	ReadyAfter    time.Duration
	UnreadyAt     time.Duration // 0: never
	Memory        int64         // bytes in use while running
	WriteEvery    time.Duration // 0: no storage writes
}

// ContainerScript returns the script of container c in a pod with the given
// annotations.
func ContainerScript(annotations map[string]string, c *corev1.Container) (Script, error) {
	src, ok := annotations[ScriptAnnotationPrefix+c.Name]
	if !ok && len(c.Command) > 0 && c.Command[0] == ScriptCommand {
		src, ok = strings.Join(c.Command[1:], " "), true
	}
	s, err := ParseScript(src)
	if err != nil {
		return Script{}, fmt.Errorf("container %s: %w", c.Name, err)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		s.HasPreStop = true
	}
	return s, nil
}

// ParseScript parses the script language described at Script. It is pure.
func ParseScript(src string) (Script, error) {
	s := Script{Forever: true}
	crash, runSet, exitSet := false, false, false
	for _, w := range strings.Fields(src) {
		key, val, hasVal := strings.Cut(w, "=")
		dur := func() (time.Duration, error) {
			d, err := time.ParseDuration(val)
			if err != nil || d < 0 {
				return 0, fmt.Errorf("%w: %q wants a non-negative duration such as 5s", ErrInvalidScript, w)
			}
			return d, nil
		}
		var err error
		switch {
		case key == "run" && hasVal:
			runSet = true
			if val == "forever" {
				s.Forever = true
				break
			}
			s.Forever = false
			s.Run, err = dur()
		case key == "exit" && hasVal:
			exitSet = true
			s.Exit, err = strconv.Atoi(val)
			if err != nil || s.Exit < 0 || s.Exit > 255 {
				err = fmt.Errorf("%w: %q wants an exit code 0..255", ErrInvalidScript, w)
			}
		case key == "crash-loop" && !hasVal:
			crash = true
		case key == "ignore-term" && !hasVal:
			s.IgnoreTerm = true
		case key == "stop-after-term" && hasVal:
			s.StopAfterTerm, err = dur()
		case key == "prestop" && hasVal:
			s.HasPreStop = true
			if val == "hang" {
				s.PreStopHang = true
				break
			}
			s.PreStop, err = dur()
		case key == "startup-after" && hasVal:
			s.StartupAfter, err = dur()
		case key == "liveness-fail-at" && hasVal:
			s.LivenessFail, err = dur()
		case key == "ready-after" && hasVal:
			s.ReadyAfter, err = dur()
		case key == "unready-at" && hasVal:
			s.UnreadyAt, err = dur()
		case key == "write" && hasVal:
			s.WriteEvery, err = dur()
			if err == nil && s.WriteEvery == 0 {
				err = fmt.Errorf("%w: %q wants a positive interval such as 1s", ErrInvalidScript, w)
			}
		case key == "mem" && hasVal:
			q, perr := resource.ParseQuantity(val)
			if perr != nil || q.Sign() < 0 {
				err = fmt.Errorf("%w: %q wants a memory quantity such as 200Mi", ErrInvalidScript, w)
			}
			s.Memory = q.Value()
		default:
			err = fmt.Errorf("%w: unknown word %q (see kubelet.Script for the language)", ErrInvalidScript, w)
		}
		if err != nil {
			return Script{}, err
		}
	}
	if crash {
		if !runSet {
			s.Forever, s.Run = false, time.Second
		}
		if !exitSet {
			s.Exit = 1
		}
	}
	return s, nil
}

// probe answers probe kind for a container that has run for ran. It is pure.
func (s Script) probe(kind ProbeKind, ran time.Duration) ProbeResult {
	ok := true
	switch kind {
	case ProbeStartup:
		ok = ran >= s.StartupAfter
	case ProbeLiveness:
		ok = s.LivenessFail == 0 || ran < s.LivenessFail
	case ProbeReadiness:
		ok = ran >= s.ReadyAfter && (s.UnreadyAt == 0 || ran < s.UnreadyAt)
	}
	if ok {
		return ProbeSuccess
	}
	return ProbeFailure
}
