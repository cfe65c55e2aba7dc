package mutation

import (
	"cmp"
	_ "embed"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/report"
)

// Equivalent is a mutant known to behave as the original program, with the
// reason. It is keyed by what survives edits elsewhere in the file: the
// file, the enclosing function, the mutator and the original line's text
// (not the line number).
type Equivalent struct {
	File    string `json:"file"`
	Func    string `json:"func"`
	Mutator string `json:"mutator"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
}

// Matches reports that m is this equivalent mutant.
func (e Equivalent) Matches(m *Mutant) bool {
	return e.File == m.File && e.Func == m.Func && e.Mutator == m.Mutator && strings.TrimSpace(e.Source) == m.Source
}

// Attribution maps code of the system under test to the guarantees it
// implements: a file (or a directory, ending in /), optionally only some of
// its functions.
type Attribution struct {
	File       string   `json:"file"`
	Funcs      []string `json:"funcs,omitempty"`
	Guarantees []string `json:"guarantees"`
	Why        string   `json:"why"`
}

func (a Attribution) coversFile(file string) bool {
	if strings.HasSuffix(a.File, "/") {
		return strings.HasPrefix(file, a.File)
	}
	return a.File == file
}

//go:embed equivalent.yaml
var equivalentYAML []byte

//go:embed guarantees.yaml
var guaranteesYAML []byte

// LoadEquivalents parses an equivalent list (the format of
// equivalent.yaml); nil data is the embedded list.
func LoadEquivalents(data []byte) ([]Equivalent, error) {
	if data == nil {
		data = equivalentYAML
	}
	var es []Equivalent
	if err := yaml.UnmarshalStrict(data, &es); err != nil {
		return nil, fmt.Errorf("equivalent mutants: %w", err)
	}
	for i, e := range es {
		if e.File == "" || e.Mutator == "" || e.Source == "" || e.Reason == "" {
			return nil, fmt.Errorf("equivalent mutants: entry %d (%s %s) needs file, mutator, source and reason", i+1, e.File, e.Func)
		}
		if _, ok := replacements[e.Mutator]; !ok {
			return nil, fmt.Errorf("equivalent mutants: entry %d: mutator %q is not one of %s", i+1, e.Mutator, strings.Join(Mutators, ", "))
		}
	}
	return es, nil
}

// LoadAttributions parses a guarantee map (the format of guarantees.yaml);
// nil data is the embedded map. Every ID must be in the catalogue.
func LoadAttributions(data []byte) ([]Attribution, error) {
	if data == nil {
		data = guaranteesYAML
	}
	var as []Attribution
	if err := yaml.UnmarshalStrict(data, &as); err != nil {
		return nil, fmt.Errorf("guarantee map: %w", err)
	}
	for i, a := range as {
		if a.File == "" || len(a.Guarantees) == 0 || a.Why == "" {
			return nil, fmt.Errorf("guarantee map: entry %d (%s) needs file, guarantees and why", i+1, a.File)
		}
		for _, id := range a.Guarantees {
			if _, ok := report.LookupGuarantee(id); !ok {
				return nil, fmt.Errorf("guarantee map: entry %d (%s): %q is not a guarantee of GUARANTEES.md", i+1, a.File, id)
			}
		}
	}
	return as, nil
}

// Attribute returns the guarantees m's code implements: those of the
// entries naming its function, else those of the entries for its whole
// file (or directory), sorted.
func Attribute(as []Attribution, m *Mutant) []string {
	var byFunc, byFile []string
	for _, a := range as {
		if !a.coversFile(m.File) {
			continue
		}
		if len(a.Funcs) == 0 {
			byFile = append(byFile, a.Guarantees...)
		} else if slices.Contains(a.Funcs, m.Func) {
			byFunc = append(byFunc, a.Guarantees...)
		}
	}
	ids := byFile
	if len(byFunc) > 0 {
		ids = byFunc
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Sample draws n of ms deterministically from seed: the same mutants, seed
// and package give the same sample on every machine. The sample is sorted
// by ID; n <= 0 or n >= len(ms) takes them all.
func Sample(ms []Mutant, n int, seed uint64, pkg string) []Mutant {
	if n <= 0 || n >= len(ms) {
		out := slices.Clone(ms)
		sortByID(out)
		return out
	}
	out := shuffled(ms, seed, pkg)[:n]
	sortByID(out)
	return out
}

func sortByID(ms []Mutant) {
	slices.SortFunc(ms, func(a, b Mutant) int { return cmp.Compare(a.ID(), b.ID()) })
}

// shuffled is a copy of ms sorted by ID, then shuffled deterministically
// from seed and key: the same mutants give the same order on every machine,
// whatever order they came in.
func shuffled(ms []Mutant, seed uint64, key string) []Mutant {
	out := slices.Clone(ms)
	sortByID(out)
	h := fnv.New64a()
	h.Write([]byte(key))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TopUpByGuarantee adds to samples (per package) mutants drawn from
// candidates (per package, the unsampled ones among them) so that every
// guarantee the candidates' code is mapped to has at least n sampled
// mutants attributed to it, as far as its code has them. The draw is
// deterministic from seed: guarantees are topped up in order of their IDs,
// each from its own shuffle of its candidates, and a mutant drawn for one
// guarantee counts for every guarantee it is attributed to. Each package's
// sample stays sorted by ID.
func TopUpByGuarantee(candidates, samples map[string][]Mutant, as []Attribution, n int, seed uint64) map[string][]Mutant {
	out := make(map[string][]Mutant, len(samples))
	taken := map[string]bool{}
	have := map[string]int{}
	for pkg, ms := range samples {
		out[pkg] = slices.Clone(ms)
		for i := range ms {
			taken[ms[i].ID()] = true
			for _, id := range Attribute(as, &ms[i]) {
				have[id]++
			}
		}
	}
	if n <= 0 {
		return out
	}
	byID := map[string][]Mutant{}
	for _, ms := range candidates {
		for i := range ms {
			for _, id := range Attribute(as, &ms[i]) {
				byID[id] = append(byID[id], ms[i])
			}
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if have[id] >= n {
			continue
		}
		pool := shuffled(byID[id], seed, "guarantee "+id)
		for i := range pool {
			if have[id] >= n {
				break
			}
			m := pool[i]
			if taken[m.ID()] {
				continue
			}
			taken[m.ID()] = true
			out[m.Package] = append(out[m.Package], m)
			for _, g := range Attribute(as, &m) {
				have[g]++
			}
		}
	}
	for pkg := range out {
		sortByID(out[pkg])
	}
	return out
}
