package record

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/podsafe/podsafe/history"
)

// The messages of the log lines the audit tailer writes.
const (
	// LogAuditIdentities: the attributes map real users to the podsafe
	// identities their calls are recorded under (IdentityMap.Map).
	LogAuditIdentities = "audit identities"
	// LogAuditOwnUsers: the calls of the users in attribute "users"
	// (comma-separated) are recorded by podsafe's own transport, not from
	// the audit log.
	LogAuditOwnUsers = "audit users recorded by podsafe"
	// LogAuditUndecodable: line "line" of audit log "file" could not be
	// read ("error"; "text" holds its start); the lines after it were.
	LogAuditUndecodable = "audit line undecodable"
	// LogAuditTorn: line "line" of audit log "file" began with the torn
	// end of an event (an API server that died mid-write, then restarted
	// and appended); the event after it was read.
	LogAuditTorn = "audit line torn"
	// LogAuditReopened: audit log "file" shrank or was replaced ("reason")
	// and is read again from its start.
	LogAuditReopened = "audit log reopened"
	// LogAuditError: audit log "file" could not be read ("error"); the
	// tailer retries.
	LogAuditError = "audit log error"
)

// AuditTailer follows the JSON audit logs of one or more API servers while
// they grow and records each request's final event as an API call (see
// ConvertAudit) on Rec. Run it with the API servers writing, e.g.
//
//	t := &record.AuditTailer{Rec: rec, Identities: ids, Paths: logs}
//	go t.Run(ctx) // returns once ctx ends and the logs are drained
//
// Each file is followed on its own and calls are recorded as they are
// read; the API servers of an HA control plane each have their file, and
// their calls interleave by arrival, which is fine since every call
// carries its own times (the history sorts calls by Invoke when loaded).
//
// A line is read once its newline is written. A line that cannot be read
// is noted (LogAuditUndecodable) and the rest goes on; a line that begins
// with the torn end of an event and goes on with a whole one (an API
// server that died mid-write and, restarted, appended to the same file) is
// read from the whole one (LogAuditTorn). A file that shrinks or is
// replaced is read again from its start (LogAuditReopened): run the API
// servers with --audit-log-maxsize=0 so that they never rotate it. A file
// that does not exist yet is waited for.
type AuditTailer struct {
	// Rec receives the calls and the notes.
	Rec *history.Recorder
	// Identities maps users and says which ones podsafe records itself
	// (nil: the rules of Identity, nothing skipped).
	Identities *IdentityMap
	// Paths are the audit log files (--audit-log-path), one per API server.
	Paths []string
	// Start is the wall time Rec started (zero: RecorderStart(Rec)).
	Start time.Time
	// Poll is how often a file at its end is looked at again (default
	// 50 ms).
	Poll time.Duration
	// MaxLine bounds a line's length (default 64 MiB); a longer one is
	// skipped and noted.
	MaxLine int
}

// Defaults of AuditTailer.
const (
	DefaultAuditPoll    = 50 * time.Millisecond
	DefaultAuditMaxLine = 64 << 20
)

// errNoRecorder: AuditTailer.Run without a recorder.
var errNoRecorder = errors.New("audit tailer: no recorder")

// Run follows every file until ctx ends, then reads each to its end once
// more (a last line still without its newline is read if it is whole) and
// returns. It writes the identity map (LogAuditIdentities) and podsafe's
// own users (LogAuditOwnUsers) first. It fails only without Rec.
func (t *AuditTailer) Run(ctx context.Context) error {
	if t.Rec == nil {
		return errNoRecorder
	}
	ids := t.Identities
	if ids == nil {
		ids = NewIdentityMap()
	}
	start := t.Start
	if start.IsZero() {
		start = RecorderStart(t.Rec)
	}
	poll := t.Poll
	if poll <= 0 {
		poll = DefaultAuditPoll
	}
	maxLine := t.MaxLine
	if maxLine <= 0 {
		maxLine = DefaultAuditMaxLine
	}
	t.Rec.Log(LogAuditIdentities, ids.Map())
	if own := ids.Own(); len(own) > 0 {
		t.Rec.Log(LogAuditOwnUsers, map[string]string{"users": strings.Join(own, ",")})
	}
	var wg sync.WaitGroup
	for _, path := range t.Paths {
		f := &auditFile{path: path, rec: t.Rec, ids: ids, start: start, poll: poll, maxLine: maxLine}
		wg.Go(func() { f.follow(ctx) })
	}
	wg.Wait()
	return nil
}

// line converts one whole line of the file and records it.
func (f *auditFile) line(no int, b []byte) {
	b = trimSpace(b)
	if len(b) == 0 {
		return
	}
	ev, err := ParseAuditLine(b)
	if err != nil {
		// A torn event followed by a whole one: read from the first
		// later start of an event that decodes.
		off := 1
		for err != nil {
			i := indexFrom(b, auditEventStart, off)
			if i < 0 {
				break
			}
			if ev2, err2 := ParseAuditLine(b[i:]); err2 == nil {
				f.rec.Log(LogAuditTorn, map[string]string{"file": f.path, "line": fmt.Sprint(no), "text": excerpt(b[:i])})
				ev, err = ev2, nil
				break
			}
			off = i + 1
		}
	}
	if err != nil {
		f.note(LogAuditUndecodable, no, err, b)
		return
	}
	call, err := f.ids.convert(ev, f.start)
	if err != nil {
		f.note(LogAuditUndecodable, no, err, b)
		return
	}
	if call.Verb == "" {
		return
	}
	// The call ended before it was read: a later Return is the API
	// server's clock running ahead of this host's.
	if now := f.rec.Now().Nanoseconds(); call.Return > now {
		call.Return = now
		call.Invoke = min(call.Invoke, now)
	}
	f.rec.API(call)
}

// auditEventStart begins every line kube-apiserver's JSON audit backend
// writes.
var auditEventStart = []byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1"`)

// note records a line that could not be read.
func (f *auditFile) note(msg string, no int, err error, b []byte) {
	f.rec.Log(msg, map[string]string{"file": f.path, "line": fmt.Sprint(no), "error": err.Error(), "text": excerpt(b)})
}

// excerptLen bounds the text of a line kept in a note.
const excerptLen = 200

func excerpt(b []byte) string {
	if len(b) > excerptLen {
		return string(b[:excerptLen]) + "…"
	}
	return string(b)
}
