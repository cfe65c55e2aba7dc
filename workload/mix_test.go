package workload

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func TestLookupMix(t *testing.T) {
	w, err := Lookup("pets+spread")
	if err != nil {
		t.Fatal(err)
	}
	if w.Name() != "pets+spread" {
		t.Errorf("name %q", w.Name())
	}
	pets, _ := Lookup("pets")
	spread, _ := Lookup("spread")
	n := w.Needs()
	if !n.Kubelets || !n.Scheduler || n.Controllers != (pets.Needs().Controllers || spread.Needs().Controllers) ||
		n.MinNodes != max(pets.Needs().MinNodes, spread.Needs().MinNodes) || n.Zones != max(pets.Needs().Zones, spread.Needs().Zones) {
		t.Errorf("needs %+v, want the union of %+v and %+v", n, pets.Needs(), spread.Needs())
	}
	if _, ok := w.(Placer); !ok {
		t.Error("a mix does not place its parts' pods")
	}
	for name, want := range map[string]string{
		"pets+pets":     "named twice",
		"register+pets": "runs alone",
		"pets+nope":     `"nope" in "pets+nope"`,
		"pets+":         "joined by",
	} {
		if _, err := Lookup(name); !errors.Is(err, ErrUnknownWorkload) || !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup(%q) = %v, want an unknown-workload error saying %q", name, err, want)
		}
	}
}

// seenEnv is a workload that records the Env it ran with.
type seenEnv struct {
	name string
	mu   sync.Mutex
	env  Env
}

func (s *seenEnv) Name() string     { return s.name }
func (s *seenEnv) Describe() string { return s.name }
func (s *seenEnv) Needs() Needs     { return Needs{} }
func (s *seenEnv) Run(ctx context.Context, env Env) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.env = env
	return nil
}

// TestMixDealsProcesses: each part gets its share of the clients, a seed of
// its own and process numbers no other part records, nested mixes too.
func TestMixDealsProcesses(t *testing.T) {
	clients := make([]kubernetes.Interface, 5)
	for i := range clients {
		clients[i] = fake.NewClientset()
	}
	a, b, c := &seenEnv{name: "a"}, &seenEnv{name: "b"}, &seenEnv{name: "c"}
	m := &Mix{Parts: []Workload{a, &Mix{Parts: []Workload{b, c}}}}
	if err := m.Run(context.Background(), Env{Clients: clients, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	if len(a.env.Clients) != 3 || a.env.Clients[0] != clients[0] || a.env.Clients[1] != clients[2] || a.env.Concurrency != 3 {
		t.Errorf("a got %d clients (concurrency %d), want clients 0, 2, 4", len(a.env.Clients), a.env.Concurrency)
	}
	if len(b.env.Clients) != 1 || b.env.Clients[0] != clients[1] || len(c.env.Clients) != 1 || c.env.Clients[0] != clients[3] {
		t.Errorf("b and c got %d and %d clients, want client 1 and client 3", len(b.env.Clients), len(c.env.Clients))
	}
	if a.env.Seed == b.env.Seed || b.env.Seed == c.env.Seed || a.env.Seed == 42 {
		t.Errorf("seeds %d, %d, %d: want each part its own", a.env.Seed, b.env.Seed, c.env.Seed)
	}
	owner := map[int]string{}
	for _, p := range []*seenEnv{a, b, c} {
		for n := range 50 {
			pid := p.env.Processes.of(n)
			if o, dup := owner[pid]; dup {
				t.Fatalf("process %d is recorded for both %s and %s", pid, o, p.name)
			}
			owner[pid] = p.name
		}
	}
	if err := (&Mix{Parts: []Workload{a, b}}).Run(context.Background(), Env{Clients: clients[:1]}); err == nil || !strings.Contains(err.Error(), "--concurrency") {
		t.Errorf("a mix of two with one process: %v", err)
	}
}
