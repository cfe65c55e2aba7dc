package controller

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestConfigDefaults: every controller's defaults fill only what was left
// zero: a given clock, logger, worker count, period or threshold is kept,
// and a config left empty gets a clock and a logger.
func TestConfigDefaults(t *testing.T) {
	type defaulted interface{ setDefaults() }
	configs := map[string]func() defaulted{
		"attachdetach":  func() defaulted { return &AttachDetachConfig{} },
		"deployment":    func() defaulted { return &DeploymentConfig{} },
		"disruption":    func() defaulted { return &DisruptionConfig{} },
		"gc":            func() defaulted { return &GarbageCollectorConfig{} },
		"namespace":     func() defaulted { return &NamespaceConfig{} },
		"nodelifecycle": func() defaulted { return &NodeLifecycleConfig{} },
		"pet":           func() defaulted { return &PetConfig{} },
		"podgc":         func() defaulted { return &PodGCConfig{} },
		"replicaset":    func() defaulted { return &ReplicaSetConfig{} },
	}
	clk := clocktesting.NewFakeClock(time.Unix(100, 0))
	logger := slog.New(slog.DiscardHandler)
	for name, newConfig := range configs {
		t.Run(name, func(t *testing.T) {
			empty := newConfig()
			empty.setDefaults()
			e := reflect.ValueOf(empty).Elem()
			for _, f := range []string{"Clock", "Logger"} {
				if e.FieldByName(f).IsNil() {
					t.Errorf("an empty config's %s is still nil", f)
				}
			}

			given := newConfig()
			g := reflect.ValueOf(given).Elem()
			g.FieldByName("Clock").Set(reflect.ValueOf(clk))
			g.FieldByName("Logger").Set(reflect.ValueOf(logger))
			set := map[string]int64{}
			for i := range g.NumField() {
				f, sf := g.Field(i), g.Type().Field(i)
				if !sf.IsExported() {
					continue
				}
				switch f.Kind() {
				case reflect.Int, reflect.Int32, reflect.Int64:
					v := int64(7)
					if f.Type() == reflect.TypeFor[time.Duration]() {
						v = int64(7 * time.Second)
					}
					f.SetInt(v)
					set[sf.Name] = v
				}
			}
			given.setDefaults()
			if got := g.FieldByName("Clock").Interface(); got != any(clk) {
				t.Errorf("the given clock was replaced by %T", got)
			}
			if got := g.FieldByName("Logger").Interface(); got != any(logger) {
				t.Error("the given logger was replaced")
			}
			for f, v := range set {
				if got := g.FieldByName(f).Int(); got != v {
					t.Errorf("%s given %d became %d", f, v, got)
				}
			}
		})
	}
}
