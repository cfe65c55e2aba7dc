package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The pods/log subresource (kubectl logs) and the subresources that would
// reach a container's process (exec, attach, portforward). kube-apiserver
// proxies a log request to the kubelet of the pod's node; here the
// ContainerLogs of Config reads the simulated runtime of that node, which
// answers only while the node's kubelet runs and its power is on, as a
// kubelet does.

// LogLine is one line of a container's log.
type LogLine struct {
	Time time.Time
	Text string
}

// ContainerLogs reads the logs of the containers of a node (Config.Logs).
type ContainerLogs interface {
	// ContainerLog returns the log of container of the pod with uid on
	// node: its current instance, or with previous the one before. more
	// is closed when lines are added or the instance ends; ended says it
	// has. ErrLogUnavailable: the node cannot answer (its kubelet is down,
	// its power off); ErrNoContainerLog: no such instance.
	ContainerLog(node, uid, container string, previous bool) (lines []LogLine, more <-chan struct{}, ended bool, err error)
}

// Errors of ContainerLogs.
var (
	ErrLogUnavailable = errors.New("the node's kubelet does not answer")
	ErrNoContainerLog = errors.New("no such container instance")
)

// logOptions are the query parameters of pods/log (corev1.PodLogOptions).
type logOptions struct {
	container  string
	follow     bool
	previous   bool
	timestamps bool
	tail       int64 // -1: all
	since      time.Duration
	sinceTime  time.Time
	limitBytes int64 // 0: no limit
}

func parseLogOptions(r *http.Request) (logOptions, error) {
	q := r.URL.Query()
	o := logOptions{container: q.Get("container"), tail: -1}
	bools := map[string]*bool{"follow": &o.follow, "previous": &o.previous, "timestamps": &o.timestamps}
	for name, p := range bools {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q: it is true or false", name, v))
			}
			*p = b
		}
	}
	ints := map[string]*int64{"tailLines": &o.tail, "limitBytes": &o.limitBytes}
	for name, p := range ints {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || (name == "limitBytes" && n == 0) {
				return o, apierrors.NewBadRequest(fmt.Sprintf("invalid %s %q: it is a %s integer", name, v, map[bool]string{true: "positive", false: "non-negative"}[name == "limitBytes"]))
			}
			*p = n
		}
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid sinceSeconds %q: it is a positive integer", v))
		}
		o.since = time.Duration(n) * time.Second
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid sinceTime %q: it is an RFC 3339 time", v))
		}
		if o.since != 0 {
			return o, apierrors.NewBadRequest("at most one of sinceTime or sinceSeconds may be specified")
		}
		o.sinceTime = t
	}
	return o, nil
}

// serveLog answers GET pods/NAME/log: the container's log as text, with
// kube-apiserver's options; follow streams until the instance ends or the
// client leaves.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	opts, err := parseLogOptions(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context() // bounded by the request timeout unless it follows
	stored, err := s.store.Get(ctx, ri.key())
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ri.name))
		return
	}
	obj, err := ri.res.decodeStored(stored.Data)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	pod := obj.(*corev1.Pod)
	container, err := logContainer(pod, opts.container)
	if err != nil {
		writeError(w, err)
		return
	}
	if pod.Spec.NodeName == "" {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	if s.cfg.Logs == nil {
		writeError(w, apierrors.NewServiceUnavailable("this API server reads no container logs: it runs without the cluster's kubelets"))
		return
	}
	lines, more, ended, err := s.cfg.Logs.ContainerLog(pod.Spec.NodeName, string(pod.UID), container, opts.previous)
	switch {
	case errors.Is(err, ErrNoContainerLog) && opts.previous:
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("previous terminated container %q in pod %q not found", container, pod.Name)))
		return
	case errors.Is(err, ErrNoContainerLog):
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod.Name, waitingReason(pod, container))))
		return
	case err != nil:
		writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the log of container %s of pod %s/%s on node %s: %v", container, pod.Namespace, pod.Name, pod.Spec.NodeName, err)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	lw := &logWriter{w: w, opts: opts, now: s.clock.Now(), left: opts.limitBytes}
	if opts.tail >= 0 && int64(len(lines)) > opts.tail {
		lines = lines[int64(len(lines))-opts.tail:]
	}
	sent := 0
	for {
		for _, l := range lines[sent:] {
			if !lw.write(l) {
				return
			}
		}
		sent = len(lines)
		flush(w)
		if !opts.follow || ended {
			return
		}
		select {
		case <-more:
		case <-ctx.Done():
			return
		case <-s.ctx.Done():
			return
		}
		all, m, e, err := s.cfg.Logs.ContainerLog(pod.Spec.NodeName, string(pod.UID), container, opts.previous)
		if err != nil {
			return // the node stopped answering: the stream ends, as a broken proxy's
		}
		// The log keeps its newest lines: what was sent is the tail of what
		// came before; send what follows it.
		lines, sent, more, ended = all, resume(all, lines, sent), m, e
	}
}

// resume returns where the lines not yet sent begin in all, given that
// the first sent of prev were sent: after the last line sent, found by time
// and text from the end (lines may have rotated out at the front).
func resume(all, prev []LogLine, sent int) int {
	if sent == 0 {
		return 0
	}
	last := prev[sent-1]
	for i := len(all) - 1; i >= 0; i-- {
		if all[i] == last {
			return i + 1
		}
	}
	return 0
}

// logWriter writes log lines with the request's options.
type logWriter struct {
	w    http.ResponseWriter
	opts logOptions
	now  time.Time
	left int64 // bytes left under limitBytes (0: none asked)
}

// write writes l unless the since options skip it, and reports whether
// more may follow.
func (lw *logWriter) write(l LogLine) bool {
	switch {
	case lw.opts.since > 0 && l.Time.Before(lw.now.Add(-lw.opts.since)):
		return true
	case !lw.opts.sinceTime.IsZero() && l.Time.Before(lw.opts.sinceTime):
		return true
	}
	text := l.Text + "\n"
	if lw.opts.timestamps {
		text = l.Time.UTC().Format(time.RFC3339Nano) + " " + text
	}
	if lw.opts.limitBytes > 0 {
		if int64(len(text)) >= lw.left {
			_, _ = lw.w.Write([]byte(text[:lw.left]))
			return false
		}
		lw.left -= int64(len(text))
	}
	_, err := lw.w.Write([]byte(text))
	return err == nil
}

// flush sends what was written, for a follower.
func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}

// logContainer picks the container a log request reads, as kube-apiserver
// does: the one named, or the pod's only container.
func logContainer(pod *corev1.Pod, name string) (string, error) {
	var names, inits []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		inits = append(inits, c.Name)
	}
	if name == "" {
		if len(names) == 1 {
			return names[0], nil
		}
		msg := fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " "))
		if len(inits) > 0 {
			msg += fmt.Sprintf(" or one of the init containers: [%s]", strings.Join(inits, " "))
		}
		return "", apierrors.NewBadRequest(msg)
	}
	for _, n := range append(names, inits...) {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// waitingReason is why the pod's container has not started, from its
// status (ContainerCreating when the status says nothing yet).
func waitingReason(pod *corev1.Pod, container string) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for _, st := range list {
			if st.Name == container && st.State.Waiting != nil && st.State.Waiting.Reason != "" {
				return st.State.Waiting.Reason
			}
		}
	}
	return "ContainerCreating"
}

// serveNoProcess answers exec, attach and portforward: simulated
// containers run no process to reach.
func (s *Server) serveNoProcess(w http.ResponseWriter, ri *requestInfo) {
	writeError(w, methodNotAllowed(fmt.Sprintf("pods/%s is not served: podsafe's simulated containers run no processes, so there is nothing to exec into, attach to or forward a port to; kubectl logs shows what a container's script did", ri.subresource)))
}
