package specs_test

import (
	"path/filepath"
	"reflect"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/specs"
)

// The runtime ledger reaches the history whole: every field of
// kubelet.LedgerEntry has its history.LedgerEntry twin with the same JSON
// name, every runtime action has a history action spelled alike, and the
// recorder a run hands the cluster writes entries that load back unchanged.
var _ = Describe("ledger in the history", Label("ledger"), func() {
	It("has a history field, same JSON name, for every runtime ledger field", func() {
		kt, ht := reflect.TypeFor[kubelet.LedgerEntry](), reflect.TypeFor[history.LedgerEntry]()
		for i := range kt.NumField() {
			kf := kt.Field(i)
			hf, ok := ht.FieldByName(kf.Name)
			Expect(ok).To(BeTrue(), "history.LedgerEntry lacks %s", kf.Name)
			Expect(hf.Tag.Get("json")).To(Equal(kf.Tag.Get("json")), "JSON name of %s", kf.Name)
		}
	})

	It("spells every runtime action as history does", func() {
		pairs := map[kubelet.LedgerAction]history.LedgerAction{
			kubelet.ActionStart:        history.LedgerStart,
			kubelet.ActionTerm:         history.LedgerTerm,
			kubelet.ActionKill:         history.LedgerKill,
			kubelet.ActionExit:         history.LedgerExit,
			kubelet.ActionPreStopStart: history.LedgerPreStopStart,
			kubelet.ActionPreStopEnd:   history.LedgerPreStopEnd,
			kubelet.ActionWrite:        history.LedgerWrite,
			kubelet.ActionWriteRefused: history.LedgerWriteRefused,
			kubelet.ActionPowerOff:     history.LedgerPowerOff,
			kubelet.ActionProbe:        history.LedgerProbe,
		}
		for k, h := range pairs {
			Expect(string(h)).To(Equal(string(k)))
		}
		// The probes, their answers and the kill reasons are spelled alike.
		words := map[string]string{
			string(kubelet.ProbeStartup): history.ProbeStartup, string(kubelet.ProbeLiveness): history.ProbeLiveness,
			string(kubelet.ProbeReadiness): history.ProbeReadiness, string(kubelet.ProbeSuccess): history.ProbeSuccess,
			string(kubelet.ProbeFailure): history.ProbeFailure, string(kubelet.ProbeUnknown): history.ProbeUnknown,
			string(kubelet.ReasonStartupProbe): history.KillStartupProbe, string(kubelet.ReasonLiveness): history.KillLivenessProbe,
		}
		for k, h := range words {
			Expect(h).To(Equal(k))
		}
	})

	It("records what the runtime did and loads it back", func() {
		path := filepath.Join(GinkgoT().TempDir(), "history.jsonl")
		rec, err := history.Create(path, history.Meta{Scenario: "ledger"})
		Expect(err).NotTo(HaveOccurred())
		scaled := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		wall := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		in := []kubelet.LedgerEntry{
			{Node: "node-0", Namespace: "default", Pod: "p", UID: "u", Container: "c", Action: kubelet.ActionProbe,
				Scaled: scaled, Wall: wall, Probe: kubelet.ProbeLiveness, Result: kubelet.ProbeFailure},
			{Node: "node-0", Namespace: "default", Pod: "p", UID: "u", Container: "c", Action: kubelet.ActionTerm,
				Scaled: scaled, Wall: wall, Grace: 30, Reason: kubelet.ReasonLiveness},
			{Node: "node-0", Namespace: "default", Pod: "p", UID: "u", Container: "c", Action: kubelet.ActionWrite,
				Scaled: scaled.Add(time.Second), Wall: wall.Add(time.Millisecond), Volume: "pv-0", Token: 17},
			{Node: "node-0", Namespace: "default", Pod: "p", UID: "u", Container: "c", Action: kubelet.ActionExit,
				ExitCode: 137, Scaled: scaled.Add(2 * time.Second), Wall: wall.Add(2 * time.Millisecond)},
		}
		ledger := specs.LedgerRecorder(rec)
		for _, e := range in {
			ledger.Record(e)
		}
		Expect(rec.Close()).To(Succeed())
		h, err := history.Load(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Ledger).To(HaveLen(len(in)))
		for i, e := range in {
			got := h.Ledger[i]
			got.T = 0
			Expect(got.Scaled.Equal(e.Scaled) && got.Wall.Equal(e.Wall)).To(BeTrue(), "times of entry %d", i)
			got.Scaled, got.Wall = e.Scaled, e.Wall
			Expect(got).To(Equal(specs.HistoryLedgerEntry(e)))
			Expect(got.Grace).To(Equal(e.Grace))
			Expect(got.Volume).To(Equal(e.Volume))
			Expect(got.Token).To(BeEquivalentTo(e.Token))
		}
	})
})
