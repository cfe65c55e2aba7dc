package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/controller"
	"github.com/podsafe/podsafe/fencing"
	"github.com/podsafe/podsafe/internal/runset"
)

// ControllerHost is the network host all controllers run on, as the
// controllers of one controller-manager process would: cutting it cuts them
// all off the API.
const ControllerHost = "controller-manager"

// Names of the controllers StartController and StopController take.
const (
	ControllerNodeLifecycle = "node-lifecycle"
	ControllerPodGC         = "podgc"
	ControllerPet           = "pet"
	ControllerReplicaSet    = "replicaset"
	ControllerDeployment    = "deployment"
	ControllerAttachDetach  = "attachdetach"
	ControllerDisruption    = "disruption"
	// ControllerGarbageCollector deletes dependents by their
	// ownerReferences (background, foreground and orphan propagation).
	ControllerGarbageCollector = "garbagecollector"
	// ControllerNamespace deletes the content of terminating namespaces
	// and finalizes them.
	ControllerNamespace = "namespace"
	// ControllerFencing is not among ControllerNames: it starts with them
	// only when Config.Fencing.Enabled is set.
	ControllerFencing = "fencing"
)

// ControllerNames lists every controller Config.Controllers starts.
var ControllerNames = []string{ControllerNodeLifecycle, ControllerPodGC, ControllerPet, ControllerReplicaSet, ControllerDeployment, ControllerAttachDetach,
	ControllerDisruption, ControllerGarbageCollector, ControllerNamespace}

// ControllerIdentity maps each controller to the identity it talks to the
// API as.
var ControllerIdentity = map[string]string{
	ControllerNodeLifecycle:    apiserver.IdentityNodeController,
	ControllerPodGC:            apiserver.IdentityPodGC,
	ControllerPet:              apiserver.IdentityPetController,
	ControllerReplicaSet:       apiserver.IdentityReplicaSetController,
	ControllerDeployment:       apiserver.IdentityDeploymentController,
	ControllerAttachDetach:     apiserver.IdentityAttachDetachController,
	ControllerDisruption:       apiserver.IdentityDisruptionController,
	ControllerFencing:          apiserver.IdentityFencingController,
	ControllerGarbageCollector: apiserver.IdentityGarbageCollector,
	ControllerNamespace:        apiserver.IdentityNamespaceController,
}

// Errors of controller control.
var (
	// ErrControllerRunning: StartController found the controller running.
	ErrControllerRunning = errors.New("controller already running")
	// ErrControllerStopped: StopController found the controller stopped.
	ErrControllerStopped = errors.New("controller not running")
	// ErrUnknownController: no controller has that name.
	ErrUnknownController = errors.New("unknown controller")
)

// controllerSet is the cluster's running controllers.
func (c *Cluster) controllerSet() *runset.Set { return &c.controllers }

// runner is what every controller offers.
type runner interface {
	Run(ctx context.Context) error
}

// startControllersIfEnabled starts every controller when Config.Controllers
// is set.
func (c *Cluster) startControllersIfEnabled() error {
	if !c.cfg.Controllers {
		return nil
	}
	names := ControllerNames
	if c.cfg.Fencing.Enabled {
		names = append(slices.Clone(names), ControllerFencing)
	}
	for _, name := range names {
		if err := c.StartController(name); err != nil {
			return err
		}
	}
	return nil
}

// StartController starts the named controller (see ControllerNames) with its
// own identity and clientset on ControllerHost, on the cluster's clock, with
// the controller package's defaults: those are in scaled time, so at time
// scale S the 50 s node monitor grace period takes 50/S s of wall time. A
// restarted controller rebuilds its state from the API.
func (c *Cluster) StartController(name string) error {
	identity, ok := ControllerIdentity[name]
	if !ok {
		return fmt.Errorf("%w: %q (known: %v)", ErrUnknownController, name, ControllerNames)
	}
	cs, err := c.controllerClientset(identity)
	if err != nil {
		return err
	}
	log := c.log.With("component", "controller", "controller", name)
	clk := c.ComponentClock(ControllerComponent(name))
	var r runner
	switch name {
	case ControllerNodeLifecycle:
		r, err = controller.NewNodeLifecycle(controller.NodeLifecycleConfig{Client: cs, Clock: clk, Logger: log,
			FailPodsOnLostNode: c.cfg.Controller.FailPodsOnLostNode})
	case ControllerPodGC:
		r, err = controller.NewPodGC(controller.PodGCConfig{Client: cs, Clock: clk, Logger: log,
			TerminatedPodThreshold: c.cfg.Controller.TerminatedPodThreshold})
	case ControllerPet:
		r, err = controller.NewPet(controller.PetConfig{Client: cs, Clock: clk, Logger: log})
	case ControllerReplicaSet:
		r, err = controller.NewReplicaSet(controller.ReplicaSetConfig{Client: cs, Clock: clk, Logger: log})
	case ControllerDeployment:
		r, err = controller.NewDeployment(controller.DeploymentConfig{Client: cs, Clock: clk, Logger: log})
	case ControllerAttachDetach:
		r, err = controller.NewAttachDetach(controller.AttachDetachConfig{Client: cs, Clock: clk, Logger: log})
	case ControllerDisruption:
		r, err = controller.NewDisruption(controller.DisruptionConfig{Client: cs, Clock: clk, Logger: log})
	case ControllerGarbageCollector:
		var dyn dynamic.Interface
		if dyn, err = c.controllerDynamic(identity); err == nil {
			r, err = controller.NewGarbageCollector(controller.GarbageCollectorConfig{Client: cs, Dynamic: dyn, Clock: clk, Logger: log})
		}
	case ControllerNamespace:
		var dyn dynamic.Interface
		if dyn, err = c.controllerDynamic(identity); err == nil {
			r, err = controller.NewNamespace(controller.NamespaceConfig{Client: cs, Dynamic: dyn, Clock: clk, Logger: log})
		}
	case ControllerFencing:
		var agents []fencing.Agent
		if agents, err = c.FenceAgents(); err == nil {
			fo := c.cfg.Fencing
			r, err = fencing.New(fencing.Config{Client: cs, Clock: clk, Logger: log, Agents: agents,
				Threshold: fo.Threshold, Budget: fo.Budget})
		}
	}
	if err != nil {
		return fmt.Errorf("building controller %s: %w", name, err)
	}
	err = c.controllerSet().Start(name, func(ctx context.Context) {
		if err := r.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("controller stopped", "controller", name, "err", err)
		}
	})
	if errors.Is(err, runset.ErrRunning) {
		return fmt.Errorf("controller %s: %w", name, ErrControllerRunning)
	}
	return err
}

// StopController stops the named controller as a crash would: whatever it
// was doing is abandoned. It waits until the controller has stopped.
func (c *Cluster) StopController(name string) error {
	err := c.controllerSet().Stop(name, 10*time.Second)
	if errors.Is(err, runset.ErrNotRunning) {
		return fmt.Errorf("controller %s: %w", name, ErrControllerStopped)
	}
	return err
}

// ControllerRunning reports whether the named controller runs.
func (c *Cluster) ControllerRunning(name string) bool {
	return c.controllerSet().Running(name)
}

// RunningControllers lists the running controllers, sorted.
func (c *Cluster) RunningControllers() []string {
	return c.controllerSet().Names()
}

// stopControllersOnClose stops every running controller.
func (c *Cluster) stopControllersOnClose() {
	for _, name := range c.RunningControllers() {
		if err := c.StopController(name); err != nil && !errors.Is(err, ErrControllerStopped) {
			c.log.Warn("stopping controller", "controller", name, "err", err)
		}
	}
}

// controllerClientset builds identity's clientset on ControllerHost.
func (c *Cluster) controllerClientset(identity string) (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig(identity, ClientOptions{Host: ControllerHost}))
	if err != nil {
		return nil, fmt.Errorf("building clientset for %s: %w", identity, err)
	}
	return cs, nil
}

// controllerDynamic builds identity's dynamic client on ControllerHost.
func (c *Cluster) controllerDynamic(identity string) (dynamic.Interface, error) {
	d, err := dynamic.NewForConfig(c.RESTConfig(identity, ClientOptions{Host: ControllerHost}))
	if err != nil {
		return nil, fmt.Errorf("building dynamic client for %s: %w", identity, err)
	}
	return d, nil
}

// TransportWrapper returns, for an identity, a wrapper of its client's HTTP
// transport (nil: none), such as history.Recorder.WrapTransport.
type TransportWrapper func(identity string) func(http.RoundTripper) http.RoundTripper

// ControllerOptions tune the cluster's controllers.
type ControllerOptions struct {
	// FailPodsOnLostNode is the LC-4 policy: the node lifecycle controller
	// sets the pods of a node that stopped heart-beating to Failed
	// (reason NodeLost) once their toleration runs out, instead of deleting
	// them gracefully.
	FailPodsOnLostNode bool
	// TerminatedPodThreshold is how many terminated pods pod GC lets exist
	// before it deletes the oldest (LC-14; 0: the controller's default).
	TerminatedPodThreshold int
}
