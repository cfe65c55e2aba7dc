package checker

import (
	"bytes"
	"encoding/json"
)

// The pod scanner: a reader of the pod objects the store events record,
// into poPod, several times faster than encoding/json and always agreeing
// with it.

// poScanner reads the JSON of a pod object into poPod. Each method reads
// one value at s.i and leaves s.i after it; any surprise is an error, on
// which poDecode falls back to encoding/json. Objects and arrays are read
// by object and array, which call a reader per member; the readers are
// closures that only those calls use, so they stay on the stack. Repeated
// strings (phases, condition types, names) are shared through intern, and
// lists are read into scratch space reused from object to object, so that
// a decode allocates little more than its result. A scanner is not safe
// for concurrent use; the zero value is ready to use (without interning).
type poScanner struct {
	d []byte
	i int
	// intern shares repeated strings; nil shares none.
	intern *poInterner
	// Scratch lists: a list is read into one and copied out at its
	// length, one allocation per list.
	ctrs     []poContainer
	gates    []poReadinessGate
	conds    []poCondition
	statuses []poContainerStatus
	// Caches of lists read lately; nil caches nothing.
	cache *poCaches
}

// poCaches are a scanner's caches of lists, one per type.
type poCaches struct {
	ctrs     poListCache[poContainer]
	gates    poListCache[poReadinessGate]
	conds    poListCache[poCondition]
	statuses poListCache[poContainerStatus]
}

// newPoScanner returns a scanner that shares repeated strings and lists.
func newPoScanner() *poScanner { return &poScanner{intern: new(poInterner), cache: new(poCaches)} }

// poDecode decodes a pod object into p (see poScanner.decode), with a
// scanner of its own.
func poDecode(data []byte, p *poPod) error {
	var s poScanner
	return s.decode(data, p)
}

// decode decodes a pod object into p. It reads the fields of poPod
// itself, several times faster than encoding/json, which a phase check of
// a long run would spend most of its time in. Anything it does not expect
// (a value of an unexpected type, an escaped or non-ASCII key, a field name
// spelled in another case, broken JSON anywhere, nesting deeper than
// poMaxDepth) is left to encoding/json, and a repeated key is read over
// what the first one read as encoding/json does, so the result is always
// encoding/json's: the same fields, or an error.
func (s *poScanner) decode(data []byte, p *poPod) error {
	s.d, s.i = data, 0
	if err := s.pod(p); err == nil {
		s.ws()
		if s.i == len(s.d) {
			return nil
		}
	}
	*p = poPod{}
	return json.Unmarshal(data, p)
}

// poFieldNames are the JSON names of every field poPod reads.
var poFieldNames = []string{
	"metadata", "spec", "status", "name", "namespace", "uid", "annotations", "deletionTimestamp", "deletionGracePeriodSeconds",
	"nodeName", "restartPolicy", "initContainers", "containers", "readinessGates", "conditionType", "startupProbe", "livenessProbe",
	"phase", "reason", "conditions", "initContainerStatuses", "containerStatuses", "type",
	"ready", "state", "lastState", "waiting", "running", "terminated", "exitCode",
}

// poFieldLen is the length of the longest name of poFieldNames.
const poFieldLen = len("deletionGracePeriodSeconds")

// poFieldsByLen lists poFieldNames by length.
var poFieldsByLen = func() (t [poFieldLen + 1][]string) {
	for _, f := range poFieldNames {
		t[len(f)] = append(t[len(f)], f)
	}
	return t
}()

// poMisspelled reports whether the ASCII key k is a name of poFieldNames
// spelled in another case.
func poMisspelled(k []byte) bool {
	if len(k) > poFieldLen {
		return false
	}
next:
	for _, f := range poFieldsByLen[len(k)] {
		if f == string(k) {
			return false
		}
		for i := range len(k) {
			a, b := k[i], f[i]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if a != b {
				continue next
			}
		}
		return true
	}
	return false
}

// other skips the value of a key that the object being read has no field
// for. encoding/json matches keys to fields regardless of case, so a key
// that is a field name in another case is left to it (a field of another
// object so spelled too: that costs only time).
func (s *poScanner) other(k []byte) error {
	if poMisspelled(k) {
		return errPoScan
	}
	return s.skip()
}

// clone copies what st points to.
func (st poContainerState) clone() poContainerState {
	if st.Waiting != nil {
		w := *st.Waiting
		st.Waiting = &w
	}
	if st.Terminated != nil {
		t := *st.Terminated
		st.Terminated = &t
	}
	return st
}

// The scanner's caches of each type of list; nil when it caches none.
func (s *poScanner) ctrCache() *poListCache[poContainer] {
	if s.cache == nil {
		return nil
	}
	return &s.cache.ctrs
}

func (s *poScanner) gateCache() *poListCache[poReadinessGate] {
	if s.cache == nil {
		return nil
	}
	return &s.cache.gates
}

func (s *poScanner) condCache() *poListCache[poCondition] {
	if s.cache == nil {
		return nil
	}
	return &s.cache.conds
}

func (s *poScanner) statusCache() *poListCache[poContainerStatus] {
	if s.cache == nil {
		return nil
	}
	return &s.cache.statuses
}

// pod reads a whole pod object.
func (s *poScanner) pod(p *poPod) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "metadata":
			return s.metadata(p)
		case "spec":
			return s.spec(p)
		case "status":
			return s.status(p)
		}
		return s.other(k)
	})
}

func (s *poScanner) metadata(p *poPod) error {
	m := &p.Metadata
	return s.object(func(k []byte) error {
		switch string(k) {
		case "name":
			return s.str(&m.Name)
		case "namespace":
			return s.str(&m.Namespace)
		case "uid":
			return s.str(&m.UID)
		case "deletionTimestamp":
			return s.str(&m.DeletionTimestamp)
		case "deletionGracePeriodSeconds":
			return s.int64p(&m.DeletionGracePeriodSeconds)
		case "annotations":
			return s.scripts(&m.Scripts)
		}
		return s.other(k)
	})
}

func (s *poScanner) spec(p *poPod) error {
	sp := &p.Spec
	return s.object(func(k []byte) error {
		switch string(k) {
		case "nodeName":
			return s.str(&sp.NodeName)
		case "restartPolicy":
			return s.str(&sp.RestartPolicy)
		case "initContainers":
			return poList(s, &sp.InitContainers, &s.ctrs, s.ctrCache(), s.container)
		case "containers":
			return poList(s, &sp.Containers, &s.ctrs, s.ctrCache(), s.container)
		case "readinessGates":
			return poList(s, &sp.ReadinessGates, &s.gates, s.gateCache(), func(g *poReadinessGate) error {
				return s.field("conditionType", &g.ConditionType)
			})
		}
		return s.other(k)
	})
}

func (s *poScanner) container(c *poContainer) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "name":
			return s.str(&c.Name)
		case "restartPolicy":
			return s.str(&c.RestartPolicy)
		case "startupProbe":
			return s.present(&c.StartupProbe)
		case "livenessProbe":
			return s.present(&c.LivenessProbe)
		}
		return s.other(k)
	})
}

// present reads any value into a poPresent: whether it is not null.
func (s *poScanner) present(dst *poPresent) error {
	if s.null() {
		*dst = false
		return nil
	}
	if err := s.skip(); err != nil {
		return err
	}
	*dst = true
	return nil
}

// scripts reads the annotations into *dst as poScripts.UnmarshalJSON
// does.
func (s *poScanner) scripts(dst *poScripts) error {
	switch s.peek() {
	case '{':
	case 'n':
		if !s.null() {
			return errPoScan
		}
		*dst = nil
		return nil
	default:
		return s.skip()
	}
	// This object's script annotations, the last of a repeated key
	// winning (nil when it is not a string), then added to *dst.
	var cur map[string]*string
	err := s.object(func(k []byte) error {
		if !bytes.HasPrefix(k, []byte(scriptAnnotationPrefix)) {
			return s.skip()
		}
		if cur == nil {
			cur = map[string]*string{}
		}
		var v string
		switch {
		case s.peek() == '"':
			if err := s.str(&v); err != nil {
				return err
			}
		case !s.null():
			cur[string(k)] = nil
			return s.skip()
		}
		cur[string(k)] = &v
		return nil
	})
	if err != nil {
		return err
	}
	for k, v := range cur {
		if v != nil {
			if *dst == nil {
				*dst = poScripts{}
			}
			(*dst)[k] = *v
		}
	}
	return nil
}

func (s *poScanner) status(p *poPod) error {
	st := &p.Status
	return s.object(func(k []byte) error {
		switch string(k) {
		case "phase":
			return s.str(&st.Phase)
		case "reason":
			return s.str(&st.Reason)
		case "conditions":
			return poList(s, &st.Conditions, &s.conds, s.condCache(), s.condition)
		case "initContainerStatuses":
			return poList(s, &st.InitContainerStatuses, &s.statuses, s.statusCache(), s.containerStatus)
		case "containerStatuses":
			return poList(s, &st.ContainerStatuses, &s.statuses, s.statusCache(), s.containerStatus)
		}
		return s.other(k)
	})
}

func (s *poScanner) condition(c *poCondition) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "type":
			return s.str(&c.Type)
		case "status":
			return s.str(&c.Status)
		}
		return s.other(k)
	})
}

func (s *poScanner) containerStatus(cs *poContainerStatus) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "name":
			return s.str(&cs.Name)
		case "ready":
			return s.bool(&cs.Ready)
		case "state":
			return s.state(&cs.State)
		case "lastState":
			return s.state(&cs.LastState)
		}
		return s.other(k)
	})
}

func (s *poScanner) state(st *poContainerState) error {
	return s.object(func(k []byte) error {
		switch string(k) {
		case "waiting":
			return poOptional(s, &st.Waiting, func(w *poWaiting) error { return s.field("reason", &w.Reason) })
		case "running":
			return poOptional(s, &st.Running, func(*struct{}) error { return s.skip() })
		case "terminated":
			return poOptional(s, &st.Terminated, func(t *poTerminated) error {
				return s.object(func(k []byte) error {
					if string(k) == "exitCode" {
						return s.int(&t.ExitCode)
					}
					return s.other(k)
				})
			})
		}
		return s.other(k)
	})
}
