package workload

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// knobsYAML reads knobs as a scenario file holds them.
func knobsYAML(t *testing.T, doc string) Knobs {
	t.Helper()
	var k Knobs
	if err := yaml.UnmarshalStrict([]byte(doc), &k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestTuneSetsKnobsFromYAML(t *testing.T) {
	w, err := Lookup("spread")
	if err != nil {
		t.Fatal(err)
	}
	err = Tune(w, knobsYAML(t, `
spread:
  sets: 4
  interval: 2500ms
  force: true
  setWeights: [1, 2, 3, 4, 5]
  namespace: tuned
`))
	if err != nil {
		t.Fatal(err)
	}
	s := w.(*Spread)
	if s.Sets != 4 || s.Interval != 2500*time.Millisecond || !s.Force || s.SetWeights != [5]int{1, 2, 3, 4, 5} || s.Namespace != "tuned" {
		t.Errorf("tuned spread %+v", s)
	}
	if s.MaxReplicas != 0 {
		t.Errorf("a knob not given changed: MaxReplicas %d", s.MaxReplicas)
	}

	l, _ := Lookup("lifecycle")
	if err := Tune(l, knobsYAML(t, "lifecycle: {variants: [crash-always, probes]}")); err != nil {
		t.Fatal(err)
	}
	if got := l.(*Lifecycle).Variants; !cmp.Equal(got, []string{"crash-always", "probes"}) {
		t.Errorf("variants %v", got)
	}
	p, _ := Lookup("priority")
	if err := Tune(p, knobsYAML(t, "priority: {cpus: ['1', '7']}")); err != nil {
		t.Fatal(err)
	}
	if got := p.(*Priority).CPUs; !cmp.Equal(got, []string{"1", "7"}) {
		t.Errorf("cpus %v", got)
	}
}

// Each part of a mix is tuned by its own name.
func TestTuneMixParts(t *testing.T) {
	w, err := Lookup("pets+spread")
	if err != nil {
		t.Fatal(err)
	}
	if err := Tune(w, knobsYAML(t, "pets: {sets: 2}\nspread: {sets: 5}")); err != nil {
		t.Fatal(err)
	}
	m := w.(*Mix)
	if m.Parts[0].(*Pets).Sets != 2 || m.Parts[1].(*Spread).Sets != 5 {
		t.Errorf("pets %d sets, spread %d", m.Parts[0].(*Pets).Sets, m.Parts[1].(*Spread).Sets)
	}
}

// Every bad knob is one error naming the workload, the knob and what it
// wants; nothing is half-applied silently.
func TestTuneRefusesBadKnobs(t *testing.T) {
	for _, tc := range []struct {
		workload, knobs string
		want            []string
	}{
		{"spread", "spread: {setz: 4}", []string{`no knob "setz"`, "sets", "maxReplicas"}},
		{"spread", "pets: {sets: 4}", []string{`workload "pets"`, "runs spread"}},
		{"spread", "spread: {sets: 2.5}", []string{"spread.sets", "integer", "2.5"}},
		{"spread", "spread: {sets: '4'}", []string{"spread.sets", "integer"}},
		{"spread", "spread: {interval: 5}", []string{"spread.interval", "duration", `"10s"`}},
		{"spread", "spread: {interval: 5 parsecs}", []string{"spread.interval", "duration"}},
		{"spread", "spread: {setWeights: [1, 2]}", []string{"spread.setWeights", "list of 5 integers", "got 2 values"}},
		{"spread", "spread: {setWeights: 3}", []string{"spread.setWeights", "not a list"}},
		{"spread", "spread: {force: yes please}", []string{"spread.force", "true or false"}},
		{"spread", "spread: {placement: x}", []string{`no knob "placement"`}},
		{"register", "register: {watchers: []}", []string{`no knob "watchers"`}},
		{"register", "register: {limiter: 3}", []string{`no knob "limiter"`}},
		{"lifecycle", "lifecycle: {variants: [crash, 3]}", []string{"lifecycle.variants", "value 2"}},
		// Validation after the knobs are set.
		{"replicas", "replicas: {regrace: 101}", []string{"Regrace", "101"}},
		{"spread", "spread: {setShare: -1}", []string{"SetShare"}},
	} {
		w, err := Lookup(tc.workload)
		if err != nil {
			t.Fatal(err)
		}
		err = Tune(w, knobsYAML(t, tc.knobs))
		if !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("%s: %v, want ErrInvalidWorkload", tc.knobs, err)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", tc.knobs, err, want)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: more than one line: %q", tc.knobs, err)
		}
	}
}

func TestKnobNames(t *testing.T) {
	names := func(w Workload) map[string]string {
		out := map[string]string{}
		for _, k := range KnobsOf(w) {
			out[k.Name] = k.Type
		}
		return out
	}
	p := names(&Priority{})
	for name, typ := range map[string]string{"cpus": "list of strings", "opTimeout": "duration", "classWeights": "list of 4 integers", "gradual": "true or false"} {
		if p[name] != typ {
			t.Errorf("priority knob %s is %q, want %q (knobs %v)", name, p[name], typ, p)
		}
	}
	if _, ok := p["placement"]; ok {
		t.Error("Placement, code, listed as a knob")
	}
	// Embedded knobs are the workload's own.
	if r := names(&Replicas{}); r["regrace"] != "integer" || r["scripts"] != "list of strings" {
		t.Errorf("replicas knobs %v", r)
	}
	if KnobsOf(&Mix{}) != nil {
		t.Error("a mix has knobs of its own")
	}
	for _, n := range Names() {
		w, _ := Lookup(n)
		if len(KnobsOf(w)) == 0 {
			t.Errorf("workload %s has no knobs", n)
		}
	}
}

// A variant is data: replicas-grace is the replicas workload tuned by its
// file, under its own name, and every variant file builds.
func TestVariantsAreData(t *testing.T) {
	files, err := variantFiles.ReadDir("variants")
	if err != nil || len(files) == 0 {
		t.Fatalf("variants: %v, %d files", err, len(files))
	}
	for _, f := range files {
		if _, err := readVariant("variants/" + f.Name()); err != nil {
			t.Error(err)
		}
	}
	w, err := Lookup(GraceReplicasName)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := Lookup("replicas")
	if err := Tune(plain, knobsYAML(t, "replicas: {scripts: [ignore-term], maxDeleteGrace: 300, regrace: 75, interval: 5s, weights: [0, 2, 5, 1, 1]}")); err != nil {
		t.Fatal(err)
	}
	g, p := w.(*Replicas), plain.(*Replicas)
	if !cmp.Equal(g.SetKnobs, p.SetKnobs) {
		t.Errorf("replicas-grace %+v, the tuned replicas %+v", g.SetKnobs, p.SetKnobs)
	}
	if !cmp.Equal(g.Scripts, p.Scripts) {
		t.Errorf("scripts %v, want %v", g.Scripts, p.Scripts)
	}
	if g.Name() != GraceReplicasName || p.Name() != "replicas" || g.Describe() == p.Describe() {
		t.Errorf("names %q %q", g.Name(), p.Name())
	}
	// Each lookup is a fresh value.
	again, _ := Lookup(GraceReplicasName)
	again.(*Replicas).Sets = 9
	if g.Sets == 9 {
		t.Error("two lookups share one workload")
	}

	for _, bad := range []string{
		"name: x\nof: replicas\ndescribe: d\nknobs: {regrac: 1}\n",
		"name: x\nof: nothing\ndescribe: d\n",
		"name: x\nof: spread\ndescribe: d\n", // spread cannot run under another name
		"name: x\nof: replicas\n",
		"name: x\nof: replicas\ndescribe: d\nextra: 1\n",
	} {
		if _, err := parseVariant([]byte(bad), "bad.yaml"); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("variant %q: %v", bad, err)
		}
	}
}

func TestKnobTypeNames(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{[3]bool{}, "list of 3 booleans"}, {[]bool{}, "list of booleans"}, {[]string{}, "list of strings"},
		{[2]int{}, "list of 2 integers"}, {[]time.Duration{}, "list of durations"}, {1.5, "number"},
	} {
		if got, ok := knobType(reflect.TypeOf(tc.v)); !ok || got != tc.want {
			t.Errorf("%T: %q, %v; want %q", tc.v, got, ok, tc.want)
		}
	}
	if _, ok := knobType(reflect.TypeOf([]func(){})); ok {
		t.Error("a list of functions is a knob")
	}
}
