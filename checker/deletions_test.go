package checker

import "testing"

// TestGraceShortenedToOne: a second DELETE asking for 5 s after the first
// deletion's start + 5 s finds the shortened deadline past, and the API
// server (as kube-apiserver) leaves deletionGracePeriodSeconds 1, below
// every grace asked for; a kill that began after it and honours 1 s honours
// the API's grace, as the kubelet must (GP-5): Ok. Shortened to 5 s
// instead, the same kill is the kubelet's own wrong grace (GP-1): Illegal.
func TestGraceShortenedToOne(t *testing.T) {
	killAfter := func(stored int64) *hb {
		return (&hb{}).led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, "", "").
			deleted(2, "workload", "a", 10).
			podVersion(2.01, "a", 10, "", "").
			deleted(20, "workload", "a", 5).
			podVersion(20.01, "a", stored, "", "").
			led(21, term, "n1", "web-0", "a", grace(1)).
			led(24, kill, "n1", "web-0", "a", grace(1))
	}
	for _, tc := range []struct {
		name   string
		stored int64
		want   Verdict
	}{
		{"store shortened to 1 s", 1, Ok},
		{"store shortened to 5 s", 5, Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustVerdict(t, CheckGrace(bg, killAfter(tc.stored).history(), Options{}), tc.want)
			if tc.want == Illegal {
				mustMention(t, "description", res.Evidence[0].Description, "GP-1")
			}
		})
	}
}
