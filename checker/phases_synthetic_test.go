package checker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
)

// poSynthetic is a history of pods, each as a correct cluster records it:
// six store changes (created, bound, running and ready, deleted with 30 s,
// failed once killed, removed) in the stored JSON form, and six ledger
// entries (a crash, a restart after the back-off, TERM, KILL, the exit).
func poSynthetic(pods int) *history.History {
	h := &history.History{}
	rv := uint64(1)
	obj := func(name, uid, node, phase, del string, ready bool, ctr string) []byte {
		var b strings.Builder
		fmt.Fprintf(&b, `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"podsafe.io/script.app":"crash-loop"},`+
			`"creationTimestamp":"2030-01-01T00:00:00Z",%s"generation":1,"labels":{"app":"replicas"},"name":%q,"namespace":"default",`+
			`"resourceVersion":"%d","uid":%q},"spec":{"containers":[{"name":"app","image":"podsafe.io/sim:1","resources":{},`+
			`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],`+
			`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeName":%q,"securityContext":{},`+
			`"schedulerName":"default-scheduler","priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},`+
			`"status":{"phase":%q,"conditions":[`, del, name, rv, uid, node, phase)
		if node != "" {
			b.WriteString(`{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:00Z"}`)
		}
		if ctr != "" {
			st := map[bool]string{true: "True", false: "False"}[ready]
			fmt.Fprintf(&b, `,{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:00Z"},`+
				`{"type":"ContainersReady","status":%q,"lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:01Z"},`+
				`{"type":"Ready","status":%q,"lastProbeTime":null,"lastTransitionTime":"2030-01-01T00:00:01Z"}],"startTime":"2030-01-01T00:00:00Z",`+
				`"containerStatuses":[{"name":"app","state":%s,"lastState":{},"ready":%v,"restartCount":1,"image":"podsafe.io/sim:1",`+
				`"imageID":"","containerID":"sim://n-1","started":%v}],"qosClass":"BestEffort"}}`, st, st, ctr, ready, ready)
		} else {
			b.WriteString(`],"qosClass":"BestEffort"}}`)
		}
		return []byte(b.String())
	}
	running := `{"running":{"startedAt":"2030-01-01T00:00:00Z"}}`
	killed := `{"terminated":{"exitCode":137,"reason":"Error","startedAt":"2030-01-01T00:00:00Z","finishedAt":"2030-01-01T00:00:40Z","containerID":"sim://n-1"}}`
	del := `"deletionGracePeriodSeconds":30,"deletionTimestamp":"2030-01-01T00:01:00Z",`
	for i := range pods {
		name, uid, node := fmt.Sprintf("web-%d", i), fmt.Sprintf("uid-%08d", i), fmt.Sprintf("n%d", i%50)
		t := float64(i) * 0.001
		add := func(typ history.StoreEventType, data []byte) {
			h.Store = append(h.Store, history.StoreEvent{Type: typ, Resource: "pods", Namespace: "default", Name: name,
				RV: strconv.FormatUint(rv, 10), Object: data, T: secs(t)})
			rv++
			t += 0.0001
		}
		led := func(action history.LedgerAction, scaled float64, code int) {
			h.Ledger = append(h.Ledger, history.LedgerEntry{Node: node, Namespace: "default", Pod: name, UID: uid, Container: "app",
				Action: action, ExitCode: code, Scaled: scaledBase.Add(time.Duration(secs(scaled))), T: secs(t)})
			t += 0.0001
		}
		add(added, obj(name, uid, "", poPending, "", false, ""))
		add(modified, obj(name, uid, node, poPending, "", false, ""))
		led(start, 1, 0)
		led(exit, 2, 1)
		led(start, 12, 0)
		add(modified, obj(name, uid, node, poRunning, "", true, running))
		add(modified, obj(name, uid, node, poRunning, del, true, running))
		led(term, 20, 0)
		led(kill, 50, 0)
		led(exit, 50, 137)
		add(modified, obj(name, uid, node, poFailed, del, false, killed))
		add(removed, obj(name, uid, node, poFailed, del, false, killed))
	}
	h.End = secs(float64(pods) * 0.001)
	return h
}

func TestPhasesSynthetic(t *testing.T) {
	h := poSynthetic(100)
	mustVerdict(t, CheckPhases(bg, h, Options{}), Ok)
	mustVerdict(t, CheckBackoff(bg, h, Options{}), Ok)
}

var poBench struct {
	once sync.Once
	h    *history.History
}

// BenchmarkPhases checks a history of 1,000,000 store changes and ledger
// entries (83,334 pods of 6 + 6).
func BenchmarkPhases(b *testing.B) { poBenchCheck(b, CheckPhases) }

// BenchmarkBackoff checks the restarts of the same history.
func BenchmarkBackoff(b *testing.B) { poBenchCheck(b, CheckBackoff) }

// poBenchCheck runs check over the history of BenchmarkPhases, which must
// find it Ok, and reports the events it reads per second.
func poBenchCheck(b *testing.B, check func(context.Context, *history.History, Options) Result) {
	poBench.once.Do(func() { poBench.h = poSynthetic(83334) })
	h := poBench.h
	n := len(h.Store) + len(h.Ledger)
	b.ResetTimer()
	for b.Loop() {
		if res := check(bg, h, Options{Timeout: time.Hour}); res.Verdict != Ok {
			b.Fatalf("%s: %s", res.Verdict, res.Summary)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// A cancelled check answers Unknown.
func TestPhasesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	h := poSynthetic(2000)
	res := mustVerdict(t, CheckPhases(ctx, h, Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "cancelled")
	res = mustVerdict(t, CheckBackoff(ctx, h, Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "cancelled")
}
