package report

import (
	"strings"
	"testing"
)

func TestLoadStarved(t *testing.T) {
	for _, tc := range []struct {
		l    *Load
		want bool
	}{
		{nil, false},
		{&Load{CPUs: 2, LoadEnd: [3]float64{3.9}}, false},
		{&Load{CPUs: 2, LoadEnd: [3]float64{4.1}}, true},
		{&Load{CPUs: 0, LoadEnd: [3]float64{40}}, false}, // CPUs unknown: no claim
	} {
		if got := tc.l.Starved(); got != tc.want {
			t.Errorf("%+v: starved %v, want %v", tc.l, got, tc.want)
		}
	}
	l := &Load{CPUs: 2, LoadStart: [3]float64{0.5}, LoadEnd: [3]float64{9}, ProcessCPUSeconds: 12.25, WallSeconds: 30}
	if s := l.String(); !strings.Contains(s, "load 0.5 → 9.0 on 2 CPUs") || !strings.Contains(s, "12.2 CPU-s in 30.0 s") || !strings.Contains(s, "starved") {
		t.Errorf("%q", s)
	}
}
