package simnet

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// These tests run in a synctest bubble: time is fake and only advances when
// every goroutine is blocked, so durations are exact and the tests instant.

// reader reads from c in the background, one Read at a time, on demand.
type reader struct {
	c    net.Conn
	next chan struct{}
	got  chan readResult
}

type readResult struct {
	data string
	err  error
	at   time.Time
}

func startReader(t *testing.T, c net.Conn) *reader {
	r := &reader{c: c, next: make(chan struct{}), got: make(chan readResult, 1)}
	go func() {
		for range r.next {
			b := make([]byte, 64)
			n, err := c.Read(b)
			r.got <- readResult{string(b[:n]), err, time.Now()}
		}
	}()
	t.Cleanup(func() { close(r.next) })
	return r
}

// start begins one Read.
func (r *reader) start() { r.next <- struct{}{} }

// poll returns the Read's result if it has returned, after every goroutine in
// the bubble has settled.
func (r *reader) poll() (readResult, bool) {
	synctest.Wait()
	select {
	case res := <-r.got:
		return res, true
	default:
		return readResult{}, false
	}
}

func TestCutStallsThenHealDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{DetectTimeout: 2 * time.Second})
		ln := listen(t, n, "b:1")
		client, server := connect(t, n, ln, "a")
		r := startReader(t, server)

		client.Write([]byte("before"))
		n.Cut("a", "b")
		// Bytes sent before the cut had arrived.
		r.start()
		if res, ok := r.poll(); !ok || res.data != "before" {
			t.Fatalf("Read of bytes sent before the cut = %+v, %v; want them", res, ok)
		}
		if _, err := client.Write([]byte("during")); err != nil {
			t.Fatalf("Write across a cut = %v, want it buffered", err)
		}
		r.start()
		time.Sleep(time.Second)
		if res, ok := r.poll(); ok {
			t.Fatalf("Read across a cut returned %+v, want it to stall", res)
		}
		// The other direction still flows.
		roundTripOneWay(t, server, client, "reply")
		n.Heal("a", "b")
		if res, ok := r.poll(); !ok || res.data != "during" || res.err != nil {
			t.Fatalf("Read after heal = %+v, %v; want the held bytes", res, ok)
		}
		// The connection survived: it was cut for less than DetectTimeout.
		time.Sleep(5 * time.Second)
		roundTrip(t, client, server, "alive")
	})
}

// TestCutLinksStallsThenHealLinksDelivers: a batch cut acts on open
// connections as Cut does (bytes stall across it, the other direction
// flows), and a batch heal delivers what was held.
func TestCutLinksStallsThenHealLinksDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{DetectTimeout: 2 * time.Second})
		ln := listen(t, n, "b:1")
		client, server := connect(t, n, ln, "a")
		r := startReader(t, server)

		links := [][2]string{{"a", "b"}, {"c", "b"}}
		n.CutLinks(links)
		if _, err := client.Write([]byte("during")); err != nil {
			t.Fatalf("Write across a cut = %v, want it buffered", err)
		}
		r.start()
		time.Sleep(time.Second)
		if res, ok := r.poll(); ok {
			t.Fatalf("Read across a batch cut returned %+v, want it to stall", res)
		}
		roundTripOneWay(t, server, client, "reply")
		n.HealLinks(links)
		if res, ok := r.poll(); !ok || res.data != "during" || res.err != nil {
			t.Fatalf("Read after the batch heal = %+v, %v; want the held bytes", res, ok)
		}
	})
}

func roundTripOneWay(t *testing.T, from, to net.Conn, msg string) {
	t.Helper()
	if _, err := from.Write([]byte(msg)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(to, got); err != nil || string(got) != msg {
		t.Fatalf("Read = %q, %v; want %q", got, err, msg)
	}
}

func TestCutLongerThanDetectTimeoutFailsBothEnds(t *testing.T) {
	tests := []struct {
		name string
		cut  func(n *Network)
	}{
		{name: "forward", cut: func(n *Network) { n.Cut("a", "b") }},
		{name: "backward", cut: func(n *Network) { n.Cut("b", "a") }},
		{name: "both", cut: func(n *Network) { n.CutBoth("a", "b") }},
		{name: "isolate", cut: func(n *Network) { n.Isolate("b") }},
		{name: "partition", cut: func(n *Network) { n.Partition([]string{"a"}, []string{"b"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const detect = 2 * time.Second
				n := newNet(t, Options{DetectTimeout: detect})
				ln := listen(t, n, "b:1")
				client, server := connect(t, n, ln, "a")
				r := startReader(t, client)
				r.start()
				start := time.Now()
				tt.cut(n)
				time.Sleep(detect - time.Millisecond)
				if res, ok := r.poll(); ok {
					t.Fatalf("Read returned %+v before the detection timeout", res)
				}
				time.Sleep(time.Millisecond)
				res, ok := r.poll()
				if !ok {
					t.Fatalf("Read still blocked after the detection timeout")
				}
				var ne net.Error
				if !errors.Is(res.err, syscall.ETIMEDOUT) || !errors.As(res.err, &ne) || !ne.Timeout() {
					t.Fatalf("Read = %v, want connection timed out with Timeout() true", res.err)
				}
				if got := res.at.Sub(start); got != detect {
					t.Errorf("failed after %s, want %s", got, detect)
				}
				n.HealAll()
				if _, err := server.Write([]byte("x")); !errors.Is(err, syscall.ETIMEDOUT) {
					t.Errorf("server Write after heal = %v, want the connection to stay failed", err)
				}
				if _, err := server.Read(make([]byte, 1)); !errors.Is(err, syscall.ETIMEDOUT) {
					t.Errorf("server Read after heal = %v, want the connection to stay failed", err)
				}
			})
		})
	}
}

func TestDetectionRestartsWithEachCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const detect = 2 * time.Second
		n := newNet(t, Options{DetectTimeout: detect})
		ln := listen(t, n, "b:1")
		client, server := connect(t, n, ln, "a")
		for range 3 {
			n.Cut("a", "b")
			time.Sleep(detect - time.Millisecond)
			n.HealAll()
			time.Sleep(time.Millisecond)
		}
		// A cut in one direction plus one in the other is still one cut.
		n.Cut("a", "b")
		time.Sleep(detect / 2)
		n.Cut("b", "a")
		n.Heal("a", "b")
		time.Sleep(detect/2 - time.Millisecond)
		n.HealAll()
		roundTrip(t, client, server, "alive")
	})
}

func TestIdleConnectionFailsAcrossCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{DetectTimeout: time.Second})
		ln := listen(t, n, "b:1")
		client, server := connect(t, n, ln, "a")
		n.Cut("b", "a")
		time.Sleep(time.Second + time.Millisecond)
		n.HealAll()
		for _, c := range []net.Conn{client, server} {
			if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.ETIMEDOUT) {
				t.Errorf("Write on an idle connection cut past detection = %v, want timed out", err)
			}
		}
	})
}

func TestDialAcrossCut(t *testing.T) {
	tests := []struct {
		name     string
		addr     string
		cut      func(n *Network)
		timeout  time.Duration // context timeout; 0 means none
		healAt   time.Duration // 0 means never
		wantErr  bool
		wantTook time.Duration
	}{
		{name: "forward cut, ctx timeout", cut: func(n *Network) { n.Cut("a", "b") }, timeout: 3 * time.Second, wantErr: true, wantTook: 3 * time.Second},
		{name: "backward cut, ctx timeout", cut: func(n *Network) { n.Cut("b", "a") }, timeout: 3 * time.Second, wantErr: true, wantTook: 3 * time.Second},
		{name: "default dial timeout", cut: func(n *Network) { n.Isolate("a") }, wantErr: true, wantTook: DefaultDialTimeout},
		{name: "heal during the stall", cut: func(n *Network) { n.CutBoth("a", "b") }, timeout: 5 * time.Second, healAt: time.Second, wantTook: time.Second},
		{name: "cut to a host with no listener stalls too", addr: "nobody:1", cut: func(n *Network) { n.Cut("a", "nobody") }, timeout: time.Second, wantErr: true, wantTook: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNet(t, Options{})
				listen(t, n, "b:1")
				n.AddHost("nobody")
				tt.cut(n)
				if tt.healAt > 0 {
					time.AfterFunc(tt.healAt, n.HealAll)
				}
				ctx := context.Background()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				addr := tt.addr
				if addr == "" {
					addr = "b:1"
				}
				start := time.Now()
				c, err := n.Dial(ctx, "a", addr)
				if c != nil {
					c.Close()
				}
				if took := time.Since(start); took != tt.wantTook {
					t.Errorf("Dial took %s, want %s", took, tt.wantTook)
				}
				if !tt.wantErr {
					if err != nil {
						t.Fatalf("Dial = %v, want success", err)
					}
					return
				}
				var ne net.Error
				if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
					t.Errorf("Dial = %v, want a timeout", err)
				}
			})
		})
	}
}

func TestDialCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{})
		n.Cut("a", "b")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		if _, err := n.Dial(ctx, "a", "b:1"); !errors.Is(err, context.Canceled) {
			t.Errorf("Dial = %v, want context.Canceled", err)
		}
	})
}

func TestRuleShapes(t *testing.T) {
	cut := func(from, to string) Rule { return Rule{From: from, To: to, Cut: true} }
	tests := []struct {
		name  string
		apply func(n *Network)
		want  []Rule
	}{
		{
			name:  "cut one way",
			apply: func(n *Network) { n.Cut("a", "b") },
			want:  []Rule{cut("a", "b")},
		},
		{
			name:  "cut both",
			apply: func(n *Network) { n.CutBoth("a", "b") },
			want:  []Rule{cut("a", "b"), cut("b", "a")},
		},
		{
			name:  "cut links at once",
			apply: func(n *Network) { n.CutLinks([][2]string{{"a", "b"}, {"c", "a"}, {"d", "d"}}) },
			want:  []Rule{cut("a", "b"), cut("c", "a")},
		},
		{
			name: "heal links at once",
			apply: func(n *Network) {
				n.CutLinks([][2]string{{"a", "b"}, {"c", "a"}, {"b", "c"}})
				n.HealLinks([][2]string{{"a", "b"}, {"c", "a"}})
			},
			want: []Rule{cut("b", "c")},
		},
		{
			name:  "cut self is ignored",
			apply: func(n *Network) { n.Cut("a", "a") },
		},
		{
			name:  "partition",
			apply: func(n *Network) { n.Partition([]string{"a", "b"}, []string{"c"}) },
			want:  []Rule{cut("a", "c"), cut("b", "c"), cut("c", "a"), cut("c", "b")},
		},
		{
			name:  "partition in three",
			apply: func(n *Network) { n.Partition([]string{"a"}, []string{"b"}, []string{"c"}) },
			want:  []Rule{cut("a", "b"), cut("a", "c"), cut("b", "a"), cut("b", "c"), cut("c", "a"), cut("c", "b")},
		},
		{
			name:  "isolate cuts every known host",
			apply: func(n *Network) { n.Isolate("b") },
			want:  []Rule{cut("a", "b"), cut("b", "a"), cut("b", "c"), cut("b", "d"), cut("c", "b"), cut("d", "b")},
		},
		{
			name: "heal one direction",
			apply: func(n *Network) {
				n.CutBoth("a", "b")
				n.Heal("a", "b")
			},
			want: []Rule{cut("b", "a")},
		},
		{
			name: "heal all keeps delays",
			apply: func(n *Network) {
				n.Isolate("a")
				n.Delay("c", "d", time.Second)
				n.HealAll()
			},
			want: []Rule{{From: "c", To: "d", Delay: time.Second}},
		},
		{
			name: "delay and cut on one link",
			apply: func(n *Network) {
				n.Delay("a", "b", time.Second)
				n.Cut("a", "b")
			},
			want: []Rule{{From: "a", To: "b", Cut: true, Delay: time.Second}},
		},
		{
			name: "zero delay removes it",
			apply: func(n *Network) {
				n.Delay("a", "b", time.Second)
				n.Delay("a", "b", 0)
			},
		},
		{
			name:  "fence cuts every host",
			apply: func(n *Network) { n.FenceHost("b") },
			want:  []Rule{cut("a", "b"), cut("b", "a"), cut("b", "c"), cut("b", "d"), cut("c", "b"), cut("d", "b")},
		},
		{
			name: "a fence outlasts heal all, reset and heal",
			apply: func(n *Network) {
				n.FenceHost("b")
				n.HealAll()
				n.Reset()
				n.Heal("a", "b")
				n.Partition([]string{"a", "b"}, []string{"c"})
				n.HealAll()
			},
			want: []Rule{cut("a", "b"), cut("b", "a"), cut("b", "c"), cut("b", "d"), cut("c", "b"), cut("d", "b")},
		},
		{
			name: "a fence cuts hosts that appear later",
			apply: func(n *Network) {
				n.FenceHost("d")
				n.AddHost("e")
				n.UnfenceHost("a") // not fenced: no effect
			},
			want: []Rule{cut("a", "d"), cut("b", "d"), cut("c", "d"), cut("d", "a"), cut("d", "b"), cut("d", "c"), cut("d", "e"), cut("e", "d")},
		},
		{
			name: "unfence heals the host's links",
			apply: func(n *Network) {
				n.FenceHost("b")
				n.FenceHost("c")
				n.UnfenceHost("b")
			},
			want: []Rule{cut("a", "c"), cut("b", "c"), cut("c", "a"), cut("c", "b"), cut("c", "d"), cut("d", "c")},
		},
		{
			name: "reset removes everything",
			apply: func(n *Network) {
				n.Partition([]string{"a"}, []string{"b", "c"})
				n.Delay("c", "d", time.Second)
				n.Reset()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNet(t, Options{})
			for _, h := range []string{"a", "b", "c", "d"} {
				n.AddHost(h)
			}
			tt.apply(n)
			got := n.Rules()
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Rule{}, "Since"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Rules (-want +got):\n%s", diff)
			}
			for _, r := range got {
				if r.Since.IsZero() {
					t.Errorf("rule %s has no Since", r)
				}
			}
		})
	}
}

func TestRuleString(t *testing.T) {
	tests := []struct {
		rule Rule
		want string
	}{
		{Rule{From: "a", To: "b", Cut: true}, "a->b cut"},
		{Rule{From: "a", To: "b", Delay: 50 * time.Millisecond}, "a->b delay=50ms"},
		{Rule{From: "a", To: "b", Cut: true, Delay: time.Second}, "a->b cut delay=1s"},
	}
	for _, tt := range tests {
		if got := tt.rule.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{})
		ln := listen(t, n, "b:1")
		n.Delay("a", "b", 100*time.Millisecond)
		n.Delay("b", "a", 50*time.Millisecond)
		start := time.Now()
		client, server := connect(t, n, ln, "a")
		if got := time.Since(start); got != 150*time.Millisecond {
			t.Errorf("Dial took %s, want one round trip of 150ms", got)
		}

		start = time.Now()
		r := startReader(t, server)
		client.Write([]byte("1"))
		time.Sleep(10 * time.Millisecond)
		client.Write([]byte("2"))
		// A shorter delay does not let later bytes overtake earlier ones.
		n.Delay("a", "b", 10*time.Millisecond)
		client.Write([]byte("3"))
		client.(*Conn).CloseWrite()

		type arrival struct {
			Data string
			At   time.Duration
		}
		var got []arrival
		for {
			r.start()
			res := <-r.got
			if res.err != nil && res.err != io.EOF {
				t.Fatalf("Read: %v", res.err)
			}
			got = append(got, arrival{res.data, res.at.Sub(start)})
			if res.err == io.EOF {
				break
			}
		}
		// "2" and "3" become readable at the same instant, so one Read takes both.
		want := []arrival{{"1", 100 * time.Millisecond}, {"23", 110 * time.Millisecond}, {"", 110 * time.Millisecond}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("arrivals (-want +got):\n%s", diff)
		}
		// The other direction has its own delay.
		start = time.Now()
		rc := startReader(t, client)
		server.Write([]byte("back"))
		rc.start()
		if res := <-rc.got; res.data != "back" || res.at.Sub(start) != 50*time.Millisecond {
			t.Errorf("reverse read = %+v after %s, want back after 50ms", res, res.at.Sub(start))
		}
	})
}

func TestCloseAcrossCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNet(t, Options{DetectTimeout: 10 * time.Second})
		ln := listen(t, n, "b:1")
		client, server := connect(t, n, ln, "a")
		r := startReader(t, server)
		n.Cut("a", "b")
		client.Write([]byte("held"))
		client.Close()
		r.start()
		time.Sleep(time.Second)
		if res, ok := r.poll(); ok {
			t.Fatalf("Read returned %+v while the FIN was held by a cut", res)
		}
		// A reset cannot cross the cut either: writes vanish.
		n.Cut("b", "a")
		n.Heal("a", "b")
		if res, ok := r.poll(); !ok || res.data != "held" {
			t.Fatalf("Read after heal = %+v, %v; want the held data", res, ok)
		}
		r.start()
		if res, ok := r.poll(); !ok || res.err != io.EOF {
			t.Fatalf("Read after the data = %+v, %v; want EOF", res, ok)
		}
		if _, err := server.Write([]byte("into the void")); err != nil {
			t.Errorf("Write to a closed peer across a cut = %v, want it to vanish", err)
		}
		n.HealAll()
		if _, err := server.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("Write to a closed peer = %v, want reset", err)
		}
	})
}
