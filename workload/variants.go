package workload

import (
	"embed"
	"fmt"
	"path"
	"sort"

	"sigs.k8s.io/yaml"
)

// A variant is a registered workload tuned by data: another workload with
// some of its knobs set and a name of its own, written as a YAML file in
// variants/ (name, of, describe, knobs). Its operations, namespace and
// checks are those of the workload it tunes, under its own name. A scenario
// can tune a workload the same way with its knobs; a variant is one that
// the specs and the command line name.
type variant struct {
	Name     string         `json:"name"`
	Of       string         `json:"of"`
	Describe string         `json:"describe"`
	Knobs    map[string]any `json:"knobs"`
}

//go:embed variants/*.yaml
var variantFiles embed.FS

// renamer is a workload that can run under a variant's name.
type renamer interface {
	rename(name, describe string)
}

func init() {
	names, err := variantFiles.ReadDir("variants")
	if err != nil {
		panic(err)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].Name() < names[j].Name() })
	for _, e := range names {
		v, err := readVariant(path.Join("variants", e.Name()))
		if err != nil {
			panic(err)
		}
		Add(v.Name, v.build)
	}
}

// readVariant reads the variant in file and checks it builds.
func readVariant(file string) (variant, error) {
	b, err := variantFiles.ReadFile(file)
	if err != nil {
		return variant{}, err
	}
	return parseVariant(b, file)
}

// parseVariant reads the variant b, from file, and checks it builds.
func parseVariant(b []byte, file string) (variant, error) {
	var v variant
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		return v, fmt.Errorf("workload variant %s: %w", file, err)
	}
	if v.Name == "" || v.Of == "" || v.Describe == "" {
		return v, fmt.Errorf("workload variant %s: name, of and describe are required", file)
	}
	if _, err := v.tuned(); err != nil {
		return v, fmt.Errorf("workload variant %s: %w", file, err)
	}
	return v, nil
}

// tuned builds the workload v tunes, renamed and with v's knobs set.
func (v variant) tuned() (Workload, error) {
	mk, ok := registry[v.Of]
	if !ok {
		return nil, fmt.Errorf("%w %q to tune", ErrUnknownWorkload, v.Of)
	}
	w := mk()
	r, ok := w.(renamer)
	if !ok {
		return nil, fmt.Errorf("workload %s cannot run under another name", v.Of)
	}
	if err := Tune(w, Knobs{v.Of: v.Knobs}); err != nil {
		return nil, err
	}
	r.rename(v.Name, v.Describe)
	return w, nil
}

// build is the registry's constructor of v; readVariant checked it builds.
func (v variant) build() Workload {
	w, err := v.tuned()
	if err != nil {
		panic(err)
	}
	return w
}
