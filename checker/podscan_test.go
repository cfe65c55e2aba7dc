package checker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// poSample is a pod object as the API server stores it, terminating, with
// init containers, a sidecar and a readiness gate.
const poSample = `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"podsafe.io/script.init-a":"run=1s"},` +
	`"creationTimestamp":"2026-11-22T08:25:09Z","deletionGracePeriodSeconds":7,"deletionTimestamp":"2026-11-22T08:26:00Z",` +
	`"generation":2,"labels":{"app":"lifecycle"},"name":"lc-1","namespace":"podsafe-lifecycle","resourceVersion":"225",` +
	`"uid":"17a7998d-cadf-4ad3-9736-daccf2e3f8fb"},"spec":{"initContainers":[{"name":"init-a","image":"podsafe.io/sim:1",` +
	`"resources":{},"terminationMessagePath":"/dev/termination-log"},{"name":"side-b","image":"podsafe.io/sim:1","restartPolicy":"Always"}],` +
	`"containers":[{"name":"app","image":"podsafe.io/sim:1","resources":{"requests":{"memory":"1Mi"}},"command":["podsafe-script","run=1s"]}],` +
	`"restartPolicy":"Always","terminationGracePeriodSeconds":4,"nodeName":"node-0","readinessGates":[{"conditionType":"podsafe.io/gate"}],` +
	`"priority":0,"enableServiceLinks":true},"status":{"phase":"Running","reason":"","conditions":[{"type":"PodScheduled","status":"True",` +
	`"lastProbeTime":null,"lastTransitionTime":"2026-11-22T08:25:09Z"},{"type":"Ready","status":"False","reason":"ReadinessGatesNotReady"}],` +
	`"startTime":"2026-11-22T08:25:09Z","initContainerStatuses":[{"name":"init-a","state":{"terminated":{"exitCode":0,"reason":"Completed",` +
	`"startedAt":"2026-11-22T08:25:09Z","finishedAt":"2026-11-22T08:25:10Z","containerID":"sim://node-0-15"}},"lastState":{},"ready":true,` +
	`"restartCount":0},{"name":"side-b","state":{"running":{"startedAt":"2026-11-22T08:25:10Z"}},"lastState":{"terminated":{"exitCode":1}},"ready":true}],` +
	`"containerStatuses":[{"name":"app","state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off \"10s\""}},` +
	`"lastState":{"terminated":{"exitCode":143}},"ready":false,"restartCount":3,"started":false}],"qosClass":"BestEffort"}}`

// The scanner reads what encoding/json reads, and leaves what it does not
// expect to encoding/json.
func TestPoDecode(t *testing.T) {
	fast := func(data string) bool {
		var p poPod
		s := poScanner{d: []byte(data)}
		return s.pod(&p) == nil
	}
	for _, tc := range []struct {
		name string
		data string
		fast bool // the scanner alone reads it
	}{
		{"stored pod", poSample, true},
		{"indented", strings.ReplaceAll(strings.ReplaceAll(poSample, ",", ",\n  "), ":", " : "), true},
		{"escaped strings", `{"metadata":{"name":"a\u002db","uid":"x\"y"},"status":{"phase":"Run\u006eing"}}`, true},
		{"nulls", `{"metadata":null,"spec":{"containers":null,"nodeName":null},"status":{"containerStatuses":[{"name":"c","state":{"running":null,"terminated":{"exitCode":2}}}]}}`, true},
		{"empty", `{}`, true},
		{"empty lists", `{"spec":{"containers":[],"readinessGates":[]},"status":{"conditions":[],"containerStatuses":[{"state":{}}]}}`, true},
		{"repeated keys", `{"status":{"phase":"Pending","phase":"Running","conditions":[{"type":"Ready"}],"conditions":[]}}`, true},
		{"escaped key", `{"metadata":{"n\u0061me":"a"}}`, false},
		{"number for a string", `{"status":{"phase":3}}`, false},
		{"float exit code", `{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1.5}}}]}}`, false},
		{"trailing garbage", poSample + `}`, true},
		{"not an object", `[1,2]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got poPod
			wantErr := json.Unmarshal([]byte(tc.data), &want)
			gotErr := poDecode([]byte(tc.data), &got)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("error %v, encoding/json says %v", gotErr, wantErr)
			}
			if wantErr == nil {
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("decoded (-encoding/json +poDecode):\n%s", diff)
				}
			}
			if f := fast(tc.data); f != tc.fast {
				t.Errorf("read by the scanner alone: %v, want %v", f, tc.fast)
			}
		})
	}
	var p poPod
	if err := poDecode([]byte(poSample), &p); err != nil || p.Metadata.UID == "" || *p.Metadata.DeletionGracePeriodSeconds != 7 ||
		len(p.Spec.InitContainers) != 2 || p.Spec.InitContainers[1].RestartPolicy != poAlways || p.Spec.ReadinessGates[0].ConditionType != "podsafe.io/gate" ||
		p.Status.ContainerStatuses[0].State.Waiting.Reason != "CrashLoopBackOff" || p.Status.ContainerStatuses[0].LastState.Terminated.ExitCode != 143 {
		t.Errorf("decoded %+v, %v", p, err)
	}
}

// BenchmarkPoDecode compares the pod scanner with encoding/json on a
// stored pod object (a lifecycle pod, and a pod of the 1M-event run),
// reporting CPU time per decode besides wall time: on a shared machine it
// depends less on the neighbours.
func BenchmarkPoDecode(b *testing.B) {
	for _, obj := range []struct{ name, data string }{
		{"lifecycle", poSample},
		{"run", podJSON{name: "db3-1", uid: "00000001-0000-4000-8000-000000000001", owner: "db3", node: "node-7", phase: poRunning,
			pet: true, ord: 1, grace: 12, scheduled: true, initialized: true, ready: true, deleting: true}.render()},
	} {
		data := []byte(obj.data)
		for _, dec := range []struct {
			name   string
			decode func() func([]byte, *poPod) error
		}{
			{"scanner", func() func([]byte, *poPod) error { return poDecode }},
			{"scanner-reused", func() func([]byte, *poPod) error { return newPoScanner().decode }},
			{"encoding-json", func() func([]byte, *poPod) error {
				return func(data []byte, p *poPod) error { return json.Unmarshal(data, p) }
			}},
		} {
			b.Run(obj.name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				decode := dec.decode()
				cpu0 := cpuTime()
				for b.Loop() {
					var p poPod
					if err := decode(data, &p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
