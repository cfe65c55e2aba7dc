package workload

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
)

// Knobs are a scenario's knob values, by workload name: for each workload
// the scenario runs (each part of a mix), the values of its knobs by knob
// name. Values are as YAML or JSON decodes them (numbers, strings, booleans,
// lists); a duration is a string such as "10s".
//
//	knobs:
//	  spread: {sets: 4, maxReplicas: 6, interval: 5s}
//	  pets: {regrace: 50}
type Knobs map[string]map[string]any

// Knob is one knob of a workload: a field of its configuration that is
// plain data (a number, string, boolean, duration, or a list of those), by
// the name a scenario gives it. Fields that hold code or connections
// (Placement, Watchers, Limiter) are not knobs: the harness sets them.
type Knob struct {
	// Name is the knob's name in a scenario: the field's JSON name, or
	// its Go name with the leading capitals lowered (maxDeleteGrace).
	Name string
	// Type says what values it takes ("integer", "duration", "list of 5
	// integers", …).
	Type string

	index []int
}

// KnobsOf lists w's knobs, sorted by name. A mix has none of its own: its
// parts have theirs.
func KnobsOf(w Workload) []Knob {
	v := reflect.ValueOf(w)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	if _, ok := w.(*Mix); ok {
		return nil
	}
	var out []Knob
	collectKnobs(v.Elem().Type(), nil, &out)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func collectKnobs(t reflect.Type, index []int, out *[]Knob) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			collectKnobs(f.Type, idx, out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		typ, ok := knobType(f.Type)
		if !ok {
			continue
		}
		*out = append(*out, Knob{Name: knobName(f), Type: typ, index: idx})
	}
}

var durationType = reflect.TypeFor[time.Duration]()

// knobType names the values t takes, or reports that t is not plain data.
func knobType(t reflect.Type) (string, bool) {
	if t == durationType {
		return "duration", true
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", true
	case reflect.Float32, reflect.Float64:
		return "number", true
	case reflect.String:
		return "string", true
	case reflect.Array:
		elems, ok := knobElems(t.Elem())
		return fmt.Sprintf("list of %d %s", t.Len(), elems), ok
	case reflect.Slice:
		elems, ok := knobElems(t.Elem())
		return "list of " + elems, ok
	}
	return "", false
}

// knobElems names the values of a list's elements of type t, in the plural.
func knobElems(t reflect.Type) (string, bool) {
	typ, ok := knobType(t)
	if typ == "true or false" {
		return "booleans", ok
	}
	return typ + "s", ok
}

// knobName is f's JSON name when it has one, else its Go name with the
// leading run of capitals lowered as a word ("OpTimeout" → "opTimeout",
// "CPUs" → "cpus").
func knobName(f reflect.StructField) string {
	if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
		return tag
	}
	r := []rune(f.Name)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	// A run of capitals followed by a lower-case letter ends a word one
	// capital early (HTTPServer → httpServer), unless the lower-case
	// letter is a plural s ending the name (CPUs → cpus).
	if n > 1 && n < len(r) && !(r[n] == 's' && n+1 == len(r)) {
		n--
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}

// Tune sets w's knobs from knobs, keyed by the name of the workload (or of
// each part of a mix) they tune, and then validates w when it can validate
// itself. An unknown workload or knob, or a value of the wrong type, is an
// error naming it.
func Tune(w Workload, knobs Knobs) error {
	parts := map[string]Workload{w.Name(): w}
	if m, ok := w.(*Mix); ok {
		parts = map[string]Workload{}
		for _, p := range m.Parts {
			parts[p.Name()] = p
		}
	}
	names := slices.Sorted(maps.Keys(knobs))
	for _, name := range names {
		p, ok := parts[name]
		if !ok {
			return fmt.Errorf("%w: knobs for workload %q, which the scenario does not run (it runs %s)", ErrInvalidWorkload, name, w.Name())
		}
		if err := tuneOne(p, knobs[name]); err != nil {
			return err
		}
	}
	for _, name := range names {
		if v, ok := parts[name].(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}

func tuneOne(w Workload, values map[string]any) error {
	byName := map[string]Knob{}
	var all []string
	for _, k := range KnobsOf(w) {
		byName[k.Name] = k
		all = append(all, k.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		k, ok := byName[name]
		if !ok {
			if len(all) == 0 {
				return fmt.Errorf("%w: workload %s has no knobs", ErrInvalidWorkload, w.Name())
			}
			return fmt.Errorf("%w: workload %s has no knob %q; its knobs are %s", ErrInvalidWorkload, w.Name(), name, strings.Join(all, ", "))
		}
		field := reflect.ValueOf(w).Elem().FieldByIndex(k.index)
		if err := assign(field, values[name]); err != nil {
			return fmt.Errorf("%w: knob %s.%s wants a %s: %w", ErrInvalidWorkload, w.Name(), name, k.Type, err)
		}
	}
	return nil
}

// assign sets v from x, a value as YAML or JSON decodes it.
func assign(v reflect.Value, x any) error {
	t := v.Type()
	if t == durationType {
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("got %v (%T); write a duration with its unit, such as \"10s\"", x, x)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch t.Kind() {
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return fmt.Errorf("got %v (%T)", x, x)
		}
		v.SetBool(b)
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("got %v (%T)", x, x)
		}
		v.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f, ok := number(x)
		if !ok || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 || v.OverflowInt(int64(f)) {
			return fmt.Errorf("got %v", x)
		}
		v.SetInt(int64(f))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f, ok := number(x)
		if !ok || f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 || v.OverflowUint(uint64(f)) {
			return fmt.Errorf("got %v", x)
		}
		v.SetUint(uint64(f))
	case reflect.Float32, reflect.Float64:
		f, ok := number(x)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("got %v", x)
		}
		v.SetFloat(f)
	case reflect.Array, reflect.Slice:
		if x == nil && t.Kind() == reflect.Slice {
			v.SetZero()
			return nil
		}
		list, ok := x.([]any)
		if !ok {
			return fmt.Errorf("got %v (%T), not a list", x, x)
		}
		if t.Kind() == reflect.Array && len(list) != t.Len() {
			return fmt.Errorf("got %d values", len(list))
		}
		if t.Kind() == reflect.Slice {
			v.Set(reflect.MakeSlice(t, len(list), len(list)))
		}
		for i, e := range list {
			if err := assign(v.Index(i), e); err != nil {
				return fmt.Errorf("value %d: %w", i+1, err)
			}
		}
	default:
		return fmt.Errorf("a %s is not a knob", t)
	}
	return nil
}

// number reads x as a number, as YAML, JSON or Go code writes one.
func number(x any) (float64, bool) {
	switch n := x.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}
