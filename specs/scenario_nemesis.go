package specs

// A scenario's composed nemesis (nemesisCompose): its parts, how they are
// validated, and the schedule parts they become.

import (
	"fmt"
	"strings"
	"time"

	"github.com/podsafe/podsafe/nemesis"
)

// NemesisPart is one part of a composed nemesis (Scenario.NemesisCompose).
type NemesisPart struct {
	// Faults names faults or groups of faults, as Scenario.Nemesis does.
	Faults []string `json:"faults"`
	// Interval is the part's mean time between operations; zero: the
	// scenario's nemesisInterval.
	Interval Duration `json:"interval,omitempty"`
}

// hasFaults reports whether names names some fault ("none" names none).
func hasFaults(names []string) bool {
	fs, err := nemesis.Lookup(names...)
	return err != nil || len(fs) > 0
}

// validCompose checks NemesisCompose: every part names faults that exist
// and a valid interval, and Nemesis is not given besides.
func (s *Scenario) validCompose() error {
	if len(s.NemesisCompose) == 0 {
		return nil
	}
	if hasFaults(s.Nemesis) {
		return fmt.Errorf("nemesis %s and nemesisCompose are both given: a composed nemesis names its faults in its parts (nemesisCompose[].faults, --nemesis-compose); drop nemesis (--nemesis)", strings.Join(s.Nemesis, ","))
	}
	for i, p := range s.NemesisCompose {
		if !hasFaults(p.Faults) {
			return fmt.Errorf("nemesisCompose[%d].faults names no fault: name faults or groups of faults (see podsafe list)", i)
		}
		if _, err := nemesis.Lookup(p.Faults...); err != nil {
			return fmt.Errorf("nemesisCompose[%d].faults: %w", i, err)
		}
		if p.Interval < 0 {
			return fmt.Errorf("nemesisCompose[%d].interval must be > 0 (or left out for nemesisInterval), got %s", i, p.Interval)
		}
	}
	return nil
}

// NemesisParts returns the parts of a composed nemesis (none when the
// scenario does not compose one), each with its faults looked up and its
// interval (nemesisInterval when the part gives none).
func (s *Scenario) NemesisParts() ([]nemesis.Part, error) {
	var out []nemesis.Part
	for i, p := range s.NemesisCompose {
		fs, err := nemesis.Lookup(p.Faults...)
		if err != nil {
			return nil, fmt.Errorf("nemesisCompose[%d]: %w", i, err)
		}
		d := time.Duration(p.Interval)
		if d == 0 {
			d = time.Duration(s.NemesisInterval)
		}
		out = append(out, nemesis.Part{Name: strings.Join(p.Faults, ","), Faults: fs, Interval: d})
	}
	return out, nil
}
