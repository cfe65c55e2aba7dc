package fpctx

import (
	"context"
	"testing"

	"github.com/pingcap/failpoint"
)

// TestHookHonoursAims: the hook lets a failpoint through everywhere while
// it is unaimed, only in its component's contexts while aimed, and counts
// what it let through while the failpoint was enabled.
func TestHookHonoursAims(t *testing.T) {
	const name = "github.com/podsafe/podsafe/internal/fpctx/test"
	a, b := For("cp-0"), With(context.Background(), Kubelet("n1"))
	if got := Component(b); got != "kubelet/n1" {
		t.Fatalf("Component = %q, want kubelet/n1", got)
	}
	if For("cp-0") != a {
		t.Error("For made a second context for the same component")
	}
	if hook(a, name) {
		t.Fatal("a failpoint that is off was let through")
	}
	if err := failpoint.Enable(name, "return(true)"); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable(name) //nolint:errcheck
	if !hook(a, name) || !hook(b, name) {
		t.Fatal("an unaimed failpoint was filtered")
	}
	undo := Aim(name, "cp-0")
	if Aimed(name) != "cp-0" {
		t.Fatalf("Aimed = %q, want cp-0", Aimed(name))
	}
	if !hook(a, name) || hook(b, name) || hook(context.Background(), name) {
		t.Error("a failpoint aimed at cp-0 was let through elsewhere or filtered there")
	}
	undoAll := Aim(name, "")
	if !hook(b, name) {
		t.Error("a failpoint aimed everywhere was filtered")
	}
	undoAll()
	if Aimed(name) != "cp-0" {
		t.Errorf("after undoing the second aim, Aimed = %q, want cp-0", Aimed(name))
	}
	undo()
	if Aimed(name) != "" || !hook(b, name) {
		t.Error("undo left the failpoint aimed")
	}
	stale := Aim(name, "x")
	Aim(name, "y")
	stale()
	if Aimed(name) != "y" {
		t.Errorf("a stale undo replaced a later aim: Aimed = %q", Aimed(name))
	}
	Aim(name, "")

	before := Fired(name, "cp-0")
	hook(a, name)
	hook(a, name)
	if got := Fired(name, "cp-0") - before; got != 2 {
		t.Errorf("Fired counted %d, want 2", got)
	}
}

// TestEnableIsOneStep: a marker evaluated in one component while a
// failpoint is switched on and off again aimed at another never fires
// there. Switching on and aiming were two steps once, and a marker that
// read the aim between them fired unaimed.
func TestEnableIsOneStep(t *testing.T) {
	const name = "github.com/podsafe/podsafe/internal/fpctx/onestep"
	here := For("cp-0")
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		let := 0
		for {
			select {
			case <-stop:
				done <- let
				return
			default:
			}
			if hook(here, name) {
				let++
			}
		}
	}()
	for range 2000 {
		heal, err := Enable(name, "return(true)", Storage)
		if err != nil {
			t.Fatal(err)
		}
		if Aimed(name) != Storage {
			t.Fatalf("Aimed = %q after Enable, want %s", Aimed(name), Storage)
		}
		if err := heal(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if let := <-done; let != 0 || Fired(name, "cp-0") != 0 {
		t.Errorf("aimed at %s, the failpoint was let through %d times in cp-0 (Fired %d)", Storage, let, Fired(name, "cp-0"))
	}
	if Aimed(name) != "" {
		t.Errorf("heal left the failpoint aimed at %q", Aimed(name))
	}
	if _, err := failpoint.Status(name); err == nil {
		t.Error("heal left the failpoint on")
	}
}

func TestAimFromEnv(t *testing.T) {
	if err := aimFromEnv("a/b=cp-1; c/d = kubelet/n2 ;"); err != nil {
		t.Fatal(err)
	}
	if Aimed("a/b") != "cp-1" || Aimed("c/d") != "kubelet/n2" {
		t.Errorf("aims %q %q", Aimed("a/b"), Aimed("c/d"))
	}
	if err := aimFromEnv("nonsense"); err == nil {
		t.Error("a term without = was accepted")
	}
}
