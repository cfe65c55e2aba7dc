package fencing

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// nopAgent is an agent that confirms everything at once.
type nopAgent string

func (a nopAgent) Name() string                             { return string(a) }
func (nopAgent) Fence(context.Context, string, int64) error { return nil }
func (nopAgent) Unfence(context.Context, string) error      { return nil }

func TestConfigValidate(t *testing.T) {
	cs := fake.NewClientset()
	ok := []Agent{nopAgent("power")}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{Agents: ok}},
		{"no agents", Config{Client: cs}},
		{"nil agent", Config{Client: cs, Agents: []Agent{nil}}},
		{"unnamed agent", Config{Client: cs, Agents: []Agent{nopAgent("")}}},
		{"agents with one name", Config{Client: cs, Agents: []Agent{nopAgent("power"), nopAgent("power")}}},
		{"agent name with a comma", Config{Client: cs, Agents: []Agent{nopAgent("a,b")}}},
		{"negative threshold", Config{Client: cs, Agents: ok, Threshold: -1}},
		{"negative budget", Config{Client: cs, Agents: ok, Budget: -1}},
		{"negative resync", Config{Client: cs, Agents: ok, Resync: -1}},
		{"negative workers", Config{Client: cs, Agents: ok, Workers: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Validate = %v, want ErrInvalidConfig", err)
			}
			if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if err := (Config{Client: cs, Agents: []Agent{nopAgent("power"), nopAgent("storage")}}).Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}
	c.setDefaults()
	if c.Threshold != DefaultThreshold || c.Budget != DefaultBudget || c.Resync != DefaultResync ||
		c.Workers != DefaultWorkers || c.Clock == nil || c.Logger == nil {
		t.Errorf("defaults not applied: %+v", c)
	}
	if _, ok := c.Policy.(DefaultPolicy); !ok {
		t.Errorf("default policy is %T, want DefaultPolicy", c.Policy)
	}
}
