package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLogs is a node's container logs as the cluster would serve them:
// lines per pod UID and container, appended while a test runs.
type nodeLogs struct {
	mu      sync.Mutex
	lines   map[string][]LogLine // uid/container[/previous]
	changed chan struct{}
	ended   map[string]bool
	down    bool
}

func newNodeLogs() *nodeLogs {
	return &nodeLogs{lines: map[string][]LogLine{}, ended: map[string]bool{}, changed: make(chan struct{})}
}

func (n *nodeLogs) add(key string, t time.Time, text string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines[key] = append(n.lines[key], LogLine{Time: t, Text: text})
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *nodeLogs) end(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ended[key] = true
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *nodeLogs) ContainerLog(node, uid, container string, previous bool) ([]LogLine, <-chan struct{}, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return nil, nil, false, fmt.Errorf("kubelet of %s stopped: %w", node, ErrLogUnavailable)
	}
	key := uid + "/" + container
	if previous {
		key += "/previous"
	}
	lines, ok := n.lines[key]
	if !ok {
		return nil, nil, false, ErrNoContainerLog
	}
	return append([]LogLine(nil), lines...), n.changed, n.ended[key], nil
}

func TestPodLogs(t *testing.T) {
	logs := newNodeLogs()
	e := newTestEnv(t, func(c *Config) { c.Logs = logs })
	two := makePod("two").node("node-1").obj()
	two.Spec.Containers = append(two.Spec.Containers, corev1.Container{Name: "side", Image: "x"})
	two.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x"}}
	pod := e.seedPod(makePod("web").node("node-1").obj())
	e.seedPod(two)
	e.seedPod(makePod("pending").obj())
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	key := string(pod.UID) + "/c"
	for i := range 4 {
		logs.add(key, t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("line %d", i))
	}
	logs.add(key+"/previous", t0, "the instance before")
	c := e.client(IdentityWorkload).CoreV1().Pods("default")
	// As kubectl reads a log: a stream, whose error is the server's Status.
	read := func(name string, o *corev1.PodLogOptions) (string, error) {
		rc, err := c.GetLogs(name, o).Stream(testCtx(t))
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	for _, tc := range []struct {
		name string
		opts corev1.PodLogOptions
		want string
	}{
		{"all", corev1.PodLogOptions{}, "line 0\nline 1\nline 2\nline 3\n"},
		{"tail", corev1.PodLogOptions{TailLines: ptrTo[int64](2)}, "line 2\nline 3\n"},
		{"tail 0", corev1.PodLogOptions{TailLines: ptrTo[int64](0)}, ""},
		{"timestamps", corev1.PodLogOptions{TailLines: ptrTo[int64](1), Timestamps: true}, "2030-01-01T00:00:03Z line 3\n"},
		{"limit bytes", corev1.PodLogOptions{LimitBytes: ptrTo[int64](10)}, "line 0\nlin"},
		{"since time", corev1.PodLogOptions{SinceTime: &metav1.Time{Time: t0.Add(2 * time.Second)}}, "line 2\nline 3\n"},
		{"previous", corev1.PodLogOptions{Previous: true}, "the instance before\n"},
		{"container named", corev1.PodLogOptions{Container: "c"}, "line 0\nline 1\nline 2\nline 3\n"},
	} {
		got, err := read("web", &tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		pod  string
		opts corev1.PodLogOptions
		want string
	}{
		{"two", corev1.PodLogOptions{}, "a container name must be specified for pod two, choose one of: [c side] or one of the init containers: [init]"},
		{"web", corev1.PodLogOptions{Container: "nope"}, "container nope is not valid for pod web"},
		{"pending", corev1.PodLogOptions{}, "pod pending does not have a host assigned"},
		{"two", corev1.PodLogOptions{Container: "side"}, `container "side" in pod "two" is waiting to start: ContainerCreating`},
		{"two", corev1.PodLogOptions{Container: "side", Previous: true}, `previous terminated container "side" in pod "two" not found`},
		{"missing", corev1.PodLogOptions{}, `pods "missing" not found`},
	} {
		_, err := read(tc.pod, &tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %+v: %v, want %q", tc.pod, tc.opts, err, tc.want)
		}
	}
	// Bad options are one clear 400.
	for _, q := range []string{"tailLines=-1", "limitBytes=0", "follow=maybe", "sinceSeconds=0", "sinceSeconds=5&sinceTime=2030-01-01T00:00:00Z"} {
		_, got := readStatus(t, e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods/web/log?"+q, IdentityWorkload, "", nil))
		if got.Code != http.StatusBadRequest {
			t.Errorf("%s: %+v", q, got)
		}
	}
	// A node whose kubelet does not answer.
	logs.mu.Lock()
	logs.down = true
	logs.mu.Unlock()
	if _, err := read("web", &corev1.PodLogOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("kubelet down: %v, want 503", err)
	}
	logs.mu.Lock()
	logs.down = false
	logs.mu.Unlock()

	// exec, attach and port-forward say why they are not served.
	for _, sub := range []string{"exec?command=ls&stdout=true", "attach?stdout=true", "portforward?ports=80"} {
		st, got := readStatus(t, e.rawRequest(http.MethodPost, "/api/v1/namespaces/default/pods/web/"+sub, IdentityWorkload, "", nil))
		if got.Code != http.StatusMethodNotAllowed || !strings.Contains(st.Message, "simulated containers run no processes") {
			t.Errorf("%s: %+v %q", sub, got, st.Message)
		}
	}
}

// A followed log streams lines as they come and ends with the instance.
func TestPodLogsFollow(t *testing.T) {
	logs := newNodeLogs()
	e := newTestEnv(t, func(c *Config) { c.Logs = logs })
	pod := e.seedPod(makePod("web").node("node-1").obj())
	key := string(pod.UID) + "/c"
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	logs.add(key, t0, "first")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := e.client(IdentityWorkload).CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	r := bufio.NewReader(stream)
	line := func() string {
		s, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v (got %q)", err, s)
		}
		return s
	}
	if got := line(); got != "first\n" {
		t.Fatalf("first line %q", got)
	}
	logs.add(key, t0.Add(time.Second), "second")
	if got := line(); got != "second\n" {
		t.Fatalf("second line %q", got)
	}
	logs.add(key, t0.Add(2*time.Second), "exited with code 0 (Completed)")
	logs.end(key)
	if got := line(); got != "exited with code 0 (Completed)\n" {
		t.Fatalf("last line %q", got)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Errorf("after the end: %q, %v; want the stream closed", rest, err)
	}
}

func TestResumeAfterRotation(t *testing.T) {
	t0 := time.Now()
	l := func(i int) LogLine { return LogLine{Time: t0.Add(time.Duration(i)), Text: fmt.Sprint(i)} }
	prev := []LogLine{l(0), l(1), l(2)}
	if got := resume([]LogLine{l(1), l(2), l(3), l(4)}, prev, 3); got != 2 {
		t.Errorf("after rotation: resume at %d, want 2", got)
	}
	if got := resume([]LogLine{l(5), l(6)}, prev, 3); got != 0 {
		t.Errorf("everything sent rotated out: resume at %d, want 0", got)
	}
	if got := resume(prev, nil, 0); got != 0 {
		t.Errorf("nothing sent: %d", got)
	}
}
