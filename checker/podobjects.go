package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/podsafe/podsafe/history"
)

// Pod objects as the store events record them. The phase and back-off
// checkers read a few fields of every committed pod change; decoding each
// object into the full core/v1 Pod would cost most of their time, so they
// decode into poPod, which names only those fields (with the JSON names of
// k8s.io/api/core/v1). The checker package does not import the system under
// test, so the values the system uses are restated here.

// Pod phases (core/v1 PodPhase).
const (
	poPending   = "Pending"
	poRunning   = "Running"
	poSucceeded = "Succeeded"
	poFailed    = "Failed"
	poUnknown   = "Unknown"
)

// Pod condition types (core/v1 PodConditionType) and the node controller's
// NodeDown condition (PS-13, PS-17).
const (
	poCondScheduled       = "PodScheduled"
	poCondInitialized     = "Initialized"
	poCondContainersReady = "ContainersReady"
	poCondReady           = "Ready"
	poCondNodeDown        = "podsafe.io/NodeDown"
)

// poKnownConditions are the pod condition types a pod may carry besides its
// readiness gates: LC-7's four, the node controller's NodeDown, and the two
// Kubernetes itself writes (a disruption's target, the sandbox's readiness).
var poKnownConditions = map[string]bool{
	poCondScheduled: true, poCondInitialized: true, poCondContainersReady: true, poCondReady: true,
	poCondNodeDown: true, "DisruptionTarget": true, "PodReadyToStartContainers": true,
}

// Pod status reasons of a Failed pod that the kubelet's container states do
// not explain: the node controller's LC-4 policy fails pods of a lost node
// while their containers may still run there, and the kubelet's eviction
// (PR-14) fails a pod once its containers are dead.
const (
	poReasonNodeLost = "NodeLost"
	poReasonEvicted  = "Evicted"
)

// Restart policies (core/v1 RestartPolicy); "" is the API's default, Always.
const (
	poAlways    = "Always"
	poOnFailure = "OnFailure"
	poNever     = "Never"
)

// poPod is the part of a pod object the checkers read.
type poPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
		// DeletionTimestamp is kept as written (RFC 3339, whole seconds):
		// comparing parsed times is needed only when it changes.
		DeletionTimestamp          string `json:"deletionTimestamp"`
		DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds"`
	} `json:"metadata"`
	Spec struct {
		NodeName       string            `json:"nodeName"`
		RestartPolicy  string            `json:"restartPolicy"`
		InitContainers []poContainer     `json:"initContainers"`
		Containers     []poContainer     `json:"containers"`
		ReadinessGates []poReadinessGate `json:"readinessGates"`
	} `json:"spec"`
	Status struct {
		Phase                 string              `json:"phase"`
		Reason                string              `json:"reason"`
		Conditions            []poCondition       `json:"conditions"`
		InitContainerStatuses []poContainerStatus `json:"initContainerStatuses"`
		ContainerStatuses     []poContainerStatus `json:"containerStatuses"`
	} `json:"status"`
}

type poContainer struct {
	Name string `json:"name"`
	// RestartPolicy Always on an init container makes it a sidecar.
	RestartPolicy string `json:"restartPolicy"`
}

type poReadinessGate struct {
	ConditionType string `json:"conditionType"`
}

type poCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

type poContainerStatus struct {
	Name      string           `json:"name"`
	Ready     bool             `json:"ready"`
	State     poContainerState `json:"state"`
	LastState poContainerState `json:"lastState"`
}

type poContainerState struct {
	Waiting    *poWaiting    `json:"waiting"`
	Running    *struct{}     `json:"running"`
	Terminated *poTerminated `json:"terminated"`
}

type poWaiting struct {
	Reason string `json:"reason"`
}

type poTerminated struct {
	ExitCode int `json:"exitCode"`
}

// ref renders the pod's namespace/name.
func (p *poPod) ref() string { return podRef(p.Metadata.Namespace, p.Metadata.Name) }

// condition returns the status of the condition of type t, or "".
func (p *poPod) condition(t string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// isAppContainer reports whether name is one of the spec's app containers.
func (p *poPod) isAppContainer(name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// lastExit is the exit code of the newest termination a container status
// shows: its state, or, while it waits again (back-off, a volume), its last
// state. ok is false when it shows none.
func (s *poContainerStatus) lastExit() (code int, ok bool) {
	switch {
	case s.State.Terminated != nil:
		return s.State.Terminated.ExitCode, true
	case s.State.Running == nil && s.LastState.Terminated != nil:
		return s.LastState.Terminated.ExitCode, true
	}
	return 0, false
}

// poHasPods reports whether store records a change of a pod object, which
// CheckPhases judges.
func poHasPods(store []history.StoreEvent) bool {
	for i := range store {
		if store[i].Resource == "pods" && len(store[i].Object) > 0 {
			return true
		}
	}
	return false
}

// poEvent is one committed change of one pod (one UID), decoded.
type poEvent struct {
	store int // index in h.Store
	rv    uint64
	typ   history.StoreEventType
	t     int64
	pod   *poPod
}

// poPodHistory is every recorded change of one pod instance, in commit
// (resourceVersion) order, once each.
type poPodHistory struct {
	uid    string
	events []poEvent
}

// spec is the pod's spec as first recorded (the spec of a pod does not
// change in the fields the checkers read, but nodeName, which binding sets).
func (ph *poPodHistory) spec() *poPod { return ph.events[0].pod }

// poPods decodes the pod events of store that want accepts (nil: all) and
// groups them by UID, each group in resourceVersion order without repeats
// (a recorder that resumed its watch may record a change twice). Groups
// come in the order of their first change. It also counts the events it
// could not decode or that name no UID. Decoding, most of the work, runs on
// every processor. It is O(n log n) and reads store without changing it;
// stopped reports that st's context ended first.
func poPods(store []history.StoreEvent, st *stopper, want func(*history.StoreEvent) bool) (pods []*poPodHistory, undecoded int, stopped bool) {
	var idx []int
	for i := range store {
		ev := &store[i]
		if ev.Resource == "pods" && len(ev.Object) > 0 && (want == nil || want(ev)) {
			idx = append(idx, i)
		}
	}
	decoded := make([]poPod, len(idx))
	rvs := make([]uint64, len(idx))
	ok := make([]bool, len(idx))
	workers := min(runtime.GOMAXPROCS(0), len(idx)/1024+1)
	var wg sync.WaitGroup
	var cancelled atomic.Bool
	for w := range workers {
		wg.Go(func() {
			sc := poScanner{intern: map[string]string{}}
			for j := w; j < len(idx); j += workers {
				if j%1024 == w && st != nil && st.ctx.Err() != nil {
					cancelled.Store(true)
					return
				}
				ev := &store[idx[j]]
				rv, err := strconv.ParseUint(ev.RV, 10, 64)
				ok[j] = err == nil && sc.decode(ev.Object, &decoded[j]) == nil && decoded[j].Metadata.UID != ""
				rvs[j] = rv
			}
		})
	}
	wg.Wait()
	if cancelled.Load() {
		return nil, 0, true
	}
	byUID := map[string]*poPodHistory{}
	for j, i := range idx {
		if !ok[j] {
			undecoded++
			continue
		}
		p := &decoded[j]
		ph := byUID[p.Metadata.UID]
		if ph == nil {
			ph = &poPodHistory{uid: p.Metadata.UID}
			byUID[ph.uid] = ph
			pods = append(pods, ph)
		}
		ph.events = append(ph.events, poEvent{store: i, rv: rvs[j], typ: store[i].Type, t: store[i].T, pod: p})
	}
	for _, ph := range pods {
		evs := ph.events
		if !sort.SliceIsSorted(evs, func(a, b int) bool { return evs[a].rv < evs[b].rv }) {
			sort.SliceStable(evs, func(a, b int) bool { return evs[a].rv < evs[b].rv })
		}
		out := evs[:1]
		for _, e := range evs[1:] {
			if e.rv != out[len(out)-1].rv {
				out = append(out, e)
			}
		}
		ph.events = out
	}
	// Groups in the order of their first change.
	sort.SliceStable(pods, func(a, b int) bool { return pods[a].events[0].rv < pods[b].events[0].rv })
	return pods, undecoded, false
}

// poDecode decodes a pod object into p (see poScanner.decode).
func poDecode(data []byte, p *poPod) error {
	var s poScanner
	return s.decode(data, p)
}

// poSpecs returns, per UID, the pod as first recorded, for checkers that
// need only its spec: it decodes the creations (ADDED), and the other
// changes only when a UID of uids has no recorded creation.
func poSpecs(store []history.StoreEvent, uids map[string]bool, st *stopper) (map[string]*poPod, bool) {
	out := map[string]*poPod{}
	add := func(pods []*poPodHistory) {
		for _, ph := range pods {
			if out[ph.uid] == nil {
				out[ph.uid] = ph.spec()
			}
		}
	}
	pods, _, stopped := poPods(store, st, func(ev *history.StoreEvent) bool { return ev.Type == history.StoreAdded })
	if stopped {
		return nil, true
	}
	add(pods)
	for uid := range uids {
		if out[uid] == nil {
			pods, _, stopped = poPods(store, st, func(ev *history.StoreEvent) bool { return ev.Type != history.StoreAdded })
			if stopped {
				return nil, true
			}
			add(pods)
			break
		}
	}
	return out, false
}

// poTime parses a metadata timestamp (RFC 3339).
func poTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// poStoreLost reports whether the history notes store events of pods lost
// (the recorder's watch fell behind the store's compaction window): then
// two consecutive recorded changes of a pod need not be consecutive commits.
func poStoreLost(logs []history.LogEntry) bool {
	for _, l := range logs {
		if l.Msg == "store events lost" && (l.Attrs["resource"] == "" || l.Attrs["resource"] == "pods") {
			return true
		}
	}
	return false
}

// poEventRef renders a store event for a description.
func poEventRef(e poEvent) string {
	var b bytes.Buffer
	b.WriteString(string(e.typ))
	b.WriteString(" rv ")
	b.WriteString(strconv.FormatUint(e.rv, 10))
	b.WriteString(" (t=")
	b.WriteString(nanos(e.t))
	b.WriteString(")")
	return b.String()
}

// poScanner reads the JSON of a pod object into poPod. Each method reads
// one value at s.i and leaves s.i after it; any surprise is an error, on
// which poDecode falls back to encoding/json. Objects and arrays are read
// by object and array, which call a reader per member; the readers are
// closures that only those calls use, so they stay on the stack. Repeated
// strings (phases, condition types, names) are shared through intern, so
// that a decode allocates little more than its result.
type poScanner struct {
	d      []byte
	i      int
	intern map[string]string
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

// errPoScan is the scanner's only error: the input is not what it reads.
var errPoScan = errors.New("unexpected pod JSON")

func (s *poScanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *poScanner) peek() byte {
	s.ws()
	if s.i < len(s.d) {
		return s.d[s.i]
	}
	return 0
}

// null consumes a null, reporting whether there was one.
func (s *poScanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.d[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// rawString returns the bytes of a string without its quotes, and whether
// only encoding/json reads them right: they hold escapes, or bytes that
// are not UTF-8 (which it replaces). A control character or a bad escape
// is an error, as it is for encoding/json.
func (s *poScanner) rawString() ([]byte, bool, error) {
	if s.peek() != '"' {
		return nil, false, errPoScan
	}
	start := s.i + 1
	// Most strings are plain ASCII: the first byte that is not ends them.
	j := start
	for j < len(s.d) && poPlain[s.d[j]] {
		j++
	}
	if j < len(s.d) && s.d[j] == '"' {
		s.i = j + 1
		return s.d[start:j], false, nil
	}
	slow, ascii := false, true
	for ; j < len(s.d); j++ {
		switch c := s.d[j]; {
		case c == '"':
			s.i = j + 1
			raw := s.d[start:j]
			if !ascii && !slow {
				slow = !utf8.Valid(raw)
			}
			return raw, slow, nil
		case c == '\\':
			n := poEscape(s.d[j+1:])
			if n == 0 {
				return nil, false, errPoScan
			}
			slow = true
			j += n
		case c < 0x20:
			return nil, false, errPoScan
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, errPoScan
}

// poPlain marks the bytes a string holds as they are: printable ASCII but
// the quote and the backslash.
var poPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// poEscape returns the length of the valid JSON escape that b begins with
// (after its backslash), or 0.
func poEscape(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// str reads a string (null leaves *dst as it is, as encoding/json does).
func (s *poScanner) str(dst *string) error {
	if s.null() {
		return nil
	}
	start := s.i
	raw, slow, err := s.rawString()
	if err != nil {
		return err
	}
	if slow {
		return json.Unmarshal(s.d[start:s.i], dst)
	}
	if v, ok := s.intern[string(raw)]; ok {
		*dst = v
		return nil
	}
	v := string(raw)
	if s.intern != nil && len(s.intern) < 1<<16 {
		s.intern[v] = v
	}
	*dst = v
	return nil
}

// key reads an object key and its colon. Escaped and non-ASCII keys are
// left to encoding/json, which folds case in Unicode when it matches keys
// to fields (a Kelvin sign matches k).
func (s *poScanner) key() ([]byte, error) {
	raw, slow, err := s.rawString()
	if err != nil || slow {
		return nil, errPoScan
	}
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			return nil, errPoScan
		}
	}
	if s.peek() != ':' {
		return nil, errPoScan
	}
	s.i++
	return raw, nil
}

// enter consumes the opening of an object ('{') or array ('['), reporting
// false for a null, which holds nothing.
func (s *poScanner) enter(open byte) (bool, error) {
	if s.null() {
		return false, nil
	}
	if s.peek() != open {
		return false, errPoScan
	}
	s.i++
	return true, nil
}

// next moves to the next member of an entered object or array: it
// consumes the separator before it (none for the first), or the closing
// byte, and then reports false.
func (s *poScanner) next(close byte, first bool) (bool, error) {
	switch c := s.peek(); {
	case c == close:
		s.i++
		return false, nil
	case first:
		return true, nil
	case c == ',':
		s.i++
		return true, nil
	}
	return false, errPoScan
}

// poMaxDepth bounds the nesting of a value skip reads; deeper ones are
// left to encoding/json, which has a bound of its own.
const poMaxDepth = 1000

// skip reads any value, checking that it is JSON.
func (s *poScanner) skip() error { return s.skipNested(0) }

func (s *poScanner) skipNested(depth int) error {
	switch s.peek() {
	case '"':
		_, _, err := s.rawString()
		return err
	case '{':
		if depth >= poMaxDepth {
			return errPoScan
		}
		s.i++
		for first := true; ; first = false {
			in, err := s.next('}', first)
			if err != nil || !in {
				return err
			}
			if _, _, err := s.rawString(); err != nil {
				return err
			}
			if s.peek() != ':' {
				return errPoScan
			}
			s.i++
			if err := s.skipNested(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		if depth >= poMaxDepth {
			return errPoScan
		}
		s.i++
		for first := true; ; first = false {
			in, err := s.next(']', first)
			if err != nil || !in {
				return err
			}
			if err := s.skipNested(depth + 1); err != nil {
				return err
			}
		}
	}
	switch v := s.scalar(); string(v) {
	case "true", "false", "null":
		return nil
	default:
		if !poNumber(v) {
			return errPoScan
		}
	}
	return nil
}

// poNumber reports whether b is a JSON number.
func poNumber(b []byte) bool {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(b)
}

// poFields maps every field name poPod reads, lower-cased, to its
// spelling.
var poFields = func() map[string]string {
	m := map[string]string{}
	for _, f := range []string{
		"metadata", "spec", "status", "name", "namespace", "uid", "deletionTimestamp", "deletionGracePeriodSeconds",
		"nodeName", "restartPolicy", "initContainers", "containers", "readinessGates", "conditionType",
		"phase", "reason", "conditions", "initContainerStatuses", "containerStatuses", "type",
		"ready", "state", "lastState", "waiting", "running", "terminated", "exitCode",
	} {
		m[strings.ToLower(f)] = f
	}
	return m
}()

// poFieldLen is the length of the longest name of poFields.
const poFieldLen = len("deletionGracePeriodSeconds")

// other skips the value of a key that the object being read has no field
// for. encoding/json matches keys to fields regardless of case, so a key
// that is a field name in another case is left to it (a field of another
// object so spelled too: that costs only time).
func (s *poScanner) other(k []byte) error {
	if len(k) <= poFieldLen {
		var buf [poFieldLen]byte
		lower := buf[:len(k)]
		for i, c := range k {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if name, ok := poFields[string(lower)]; ok && name != string(k) {
			return errPoScan
		}
	}
	return s.skip()
}

// scalar returns the bytes of a number or literal.
func (s *poScanner) scalar() []byte {
	s.ws()
	start := s.i
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.d[start:s.i]
		}
		s.i++
	}
	return s.d[start:s.i]
}

func (s *poScanner) int(dst *int) error {
	if s.null() {
		return nil
	}
	v := s.scalar()
	if !poNumber(v) {
		return errPoScan
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return errPoScan
	}
	*dst = n
	return nil
}

func (s *poScanner) int64p(dst **int64) error {
	if s.null() {
		*dst = nil
		return nil
	}
	v := s.scalar()
	if !poNumber(v) {
		return errPoScan
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return errPoScan
	}
	*dst = &n
	return nil
}

func (s *poScanner) bool(dst *bool) error {
	if s.null() {
		return nil
	}
	switch string(s.scalar()) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errPoScan
	}
	return nil
}

// object reads an object, calling field with the key of each member to
// read its value; a null holds no members. field is called, not stored,
// so a closure passed to it stays on the stack.
func (s *poScanner) object(field func(key []byte) error) error {
	in, err := s.enter('{')
	for first := true; in && err == nil; first = false {
		if in, err = s.next('}', first); !in || err != nil {
			break
		}
		var k []byte
		if k, err = s.key(); err != nil {
			break
		}
		err = field(k)
	}
	return err
}

// array reads an array, calling elem to read each element; a null holds
// none.
func (s *poScanner) array(elem func() error) error {
	in, err := s.enter('[')
	for first := true; in && err == nil; first = false {
		if in, err = s.next(']', first); !in || err != nil {
			break
		}
		err = elem()
	}
	return err
}

// poList reads an array into *dst, each element with elem, as
// encoding/json does: null makes *dst nil and [] an empty slice, and the
// elements are read over those of *dst's backing array (what a repeated
// key read there before), a new element only past its capacity.
func poList[T any](s *poScanner, dst *[]T, elem func(*T) error) error {
	if s.peek() != '[' {
		if !s.null() {
			return errPoScan
		}
		*dst = nil
		return nil
	}
	list := (*dst)[:0]
	err := s.array(func() error {
		if len(list) < cap(list) {
			list = list[:len(list)+1]
		} else {
			var zero T
			list = append(list, zero)
		}
		return elem(&list[len(list)-1])
	})
	if len(list) == 0 {
		list = []T{}
	}
	*dst = list
	return err
}

// poOptional reads an object into *dst with read (a new T when *dst is
// nil, else over what a repeated key read there), or a null into nil, as
// encoding/json does for a pointer field.
func poOptional[T any](s *poScanner, dst **T, read func(*T) error) error {
	if s.peek() != '{' {
		if !s.null() {
			return errPoScan
		}
		*dst = nil
		return nil
	}
	if *dst == nil {
		*dst = new(T)
	}
	return read(*dst)
}

// field reads an object of which only the string field name matters.
func (s *poScanner) field(name string, dst *string) error {
	return s.object(func(k []byte) error {
		if string(k) == name {
			return s.str(dst)
		}
		return s.other(k)
	})
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
			return poList(s, &sp.InitContainers, s.container)
		case "containers":
			return poList(s, &sp.Containers, s.container)
		case "readinessGates":
			return poList(s, &sp.ReadinessGates, func(g *poReadinessGate) error {
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
		}
		return s.other(k)
	})
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
			return poList(s, &st.Conditions, s.condition)
		case "initContainerStatuses":
			return poList(s, &st.InitContainerStatuses, s.containerStatus)
		case "containerStatuses":
			return poList(s, &st.ContainerStatuses, s.containerStatus)
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
