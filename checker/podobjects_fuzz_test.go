package checker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// FuzzPodDecode is a differential test of the pod scanner: on any input,
// poDecode reads the same poPod as encoding/json, or fails where
// encoding/json fails. A scanner that interns its strings, reused for a
// second object, reads the same too.
func FuzzPodDecode(f *testing.F) {
	now := metav1.NewTime(time.Date(2030, 1, 1, 0, 10, 0, 0, time.UTC))
	full := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: "u1", Labels: map[string]string{"app": "web"},
			Annotations:       map[string]string{"last": `{"a":"\"quoted\" \u00e9"}`},
			DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30)},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyOnFailure,
			InitContainers: []corev1.Container{{Name: "init"}, {Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "c", Image: "busybox", Args: []string{"sleep", "1e9"}}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Reason: "x",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2,
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}}},
	}
	b, err := json.Marshal(full)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(podJSON{name: "web-1", uid: "u2", owner: "web", node: "n2", phase: poRunning, pet: true, ord: 1, grace: 30,
		scheduled: true, initialized: true, ready: true, deleting: true, crashLoop: true, restarts: 3}.render()))
	f.Add([]byte(podJSON{name: "rs-x", uid: "u3", owner: "rs", phase: poPending}.render()))
	for _, s := range []string{
		``, `null`, `{}`, ` { } `, `[]`, `"pod"`,
		`{"metadata":null,"spec":{"containers":null,"initContainers":[]},"status":{"conditions":[null]}}`,
		`{"metadata":{"name":"a\u00e9\"b","deletionGracePeriodSeconds":null}}`,
		`{"status":{"containerStatuses":[{"name":"c","ready":true,"state":{"waiting":{"reason":"CrashLoopBackOff"},"running":null}}]}}`,
		`{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1}},"state":{"terminated":{}}}]}}`,
		`{"status":{"conditions":[{"type":"A","status":"True"}],"conditions":[{"type":"B"}]}}`,
		`{"Metadata":{"NAME":"x"},"spec":{"nodename":"n"}}`,
		`{"metadata":{"name":"x","extra":{"a":[1,{"b":"}"}],"c":tru}}}`,
		`{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":+1}}}]}}`,
		`{"status":{"containerStatuses":[{"state":{"terminated":{"exitCode":1.0}}}]}}`,
		"{\"metadata\":{\"name\":\"\xff\xfe\",\"uid\":\"\u00e9\"}}",
		"{\"metadata\":{\"\u212aind\":\"x\",\"nam\u017f\":1}}",
		`{"metadata":{"name":"tab	inside"}}`,
		`{"metadata":{"uid":"a"}} trailing`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"mem=1 run=2s","other":"x","podsafe.io/script.b":null}},"spec":{"containers":[{"name":"c","livenessProbe":{"exec":{"command":["x"]}},"startupProbe":null}]}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"run=1s"},"annotations":{"podsafe.io/script.b":"mem=1"}}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"run=1s"},"annotations":null}}`,
		`{"metadata":{"annotations":{"x":1}}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"mem=1","podsafe.io/script.a":2}}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"mem=1"},"annotations":{"podsafe.io/script.a":[]}}}`,
		`{"metadata":{"annotations":5}}`,
		`{"status":{"containerStatuses":[{"name":"a","state":{"waiting":{"reason":"x"}}}],"containerStatuses":[{"state":{"waiting":{}}}]}}`,
		`{"status":{"conditions":[{"type":"A","status":"True"}],"conditions":[{"status":"False"}]},"spec":{"containers":[{"name":"c"}],"containers":[{"livenessProbe":{}}]}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"mem=1"},"annotations":"x"}}`,
		`{"metadata":{"annotations":{"podsafe.io/script.a":"a\u0020mem=1"}},"spec":{"initContainers":[{"startupProbe":{}}]}}`,
		`{"metadata":{"Annotations":{"podsafe.io/script.a":"mem=1"}},"spec":{"containers":[{"LivenessProbe":1}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want poPod
		wantErr := json.Unmarshal(data, &want)
		var got poPod
		err := poDecode(data, &got)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("encoding/json fails (%v), the scanner reads %+v", wantErr, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("encoding/json reads the object, the scanner fails: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("scanner and encoding/json differ (-json +scanner):\n%s", diff)
		}
		// An interning, caching scanner, reused, reads the same, and a
		// later read leaves what an earlier one read (and may share) as
		// it was.
		s := newPoScanner()
		var reads [2]poPod
		for i := range reads {
			if err := s.decode(data, &reads[i]); err != nil {
				t.Fatalf("interning scanner fails: %v", err)
			}
			if diff := cmp.Diff(want, reads[i]); diff != "" {
				t.Fatalf("interning scanner and encoding/json differ (-json +scanner):\n%s", diff)
			}
		}
		if diff := cmp.Diff(want, reads[0]); diff != "" {
			t.Fatalf("a second read changed the first (-json +first):\n%s", diff)
		}
	})
}

// poPlain8 agrees with poPlain on every byte of every word.
func FuzzPoPlain8(f *testing.F) {
	f.Add(uint64(0x4141414141414141))
	f.Add(uint64(0x4141412241414141))
	f.Add(uint64(0x41414141415c4141))
	f.Add(uint64(0x1f41414141414141))
	f.Add(uint64(0x41414141414141ff))
	f.Add(uint64(0x2020202020202020))
	f.Fuzz(func(t *testing.T, x uint64) {
		want := true
		for i := range 8 {
			want = want && poPlain[byte(x>>(8*i))]
		}
		if got := poPlain8(x); got != want {
			t.Fatalf("poPlain8(%#x) = %v, want %v", x, got, want)
		}
	})
}

// containsQuoted agrees with bytes.Contains of the quoted word.
func FuzzContainsQuoted(f *testing.F) {
	for _, s := range []string{`{"topologySpreadConstraints":[]}`, `"SpreadConstraints"`, `x"topologySpreadConstraints`,
		`""topologySpreadConstraints""`, `"deletionGracePeriodSeconds":3`, `"GracePeriodSeconds"`} {
		f.Add([]byte(s), "topologySpreadConstraints")
		f.Add([]byte(s), "deletionGracePeriodSeconds")
	}
	f.Add([]byte(`"abc"`), "abc")
	f.Fuzz(func(t *testing.T, b []byte, word string) {
		if word == "" {
			return
		}
		want := bytes.Contains(b, []byte(`"`+word+`"`))
		if got := containsQuoted(b, word); got != want {
			t.Fatalf("containsQuoted(%q, %q) = %v, want %v", b, word, got, want)
		}
	})
}

// A scanner shares the lists it reads again, and a repeated key in a later
// object (read over the first list) never changes what an earlier object
// read.
func TestPoScannerSharedLists(t *testing.T) {
	// The lists, and what follows them for longer than a cache slot
	// looks, are the same text in both.
	const list = `[{"name":"a","state":{"waiting":{"reason":"x"}}}]`
	same := `,"reason":"` + strings.Repeat("r", 300) + `"`
	a := `{"status":{"conditions":[{"type":"Ready","status":"True"}]` + same + `,"containerStatuses":` + list + same + `}}`
	b := `{"status":{"conditions":[{"type":"Ready","status":"True"}]` + same + `,"containerStatuses":` + list + same +
		`,"containerStatuses":[{"state":{"waiting":{"reason":"y"}}}],"conditions":[{"status":"False"}]}}`
	s := newPoScanner()
	var pa, pb poPod
	if err := s.decode([]byte(a), &pa); err != nil {
		t.Fatal(err)
	}
	if err := s.decode([]byte(b), &pb); err != nil {
		t.Fatal(err)
	}
	if got := pa.Status.ContainerStatuses[0].State.Waiting.Reason; got != "x" {
		t.Errorf("the first object's container status now waits for %q, want x", got)
	}
	if got := pa.Status.Conditions[0].Status; got != "True" {
		t.Errorf("the first object's condition is now %q, want True", got)
	}
	var want poPod
	if err := json.Unmarshal([]byte(b), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, pb); diff != "" {
		t.Errorf("second object (-json +scanner):\n%s", diff)
	}
}
