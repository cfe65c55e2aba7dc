package specs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/jsonpath"
)

// The create and wait steps work on any kind the API serves, as kubectl
// create -f and kubectl wait do: objects are resolved through the API's
// discovery, so a scenario can set up PriorityClasses, budgets and pods of
// its own.

// parseManifest reads a step's manifest: one or more YAML (or JSON)
// documents, each an object with apiVersion, kind and metadata.name.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(obj) == 0 {
			continue // an empty document between separators
		}
		u := &unstructured.Unstructured{Object: obj}
		switch {
		case u.GetAPIVersion() == "":
			return nil, fmt.Errorf("document %d: no apiVersion", i)
		case u.GetKind() == "":
			return nil, fmt.Errorf("document %d: no kind", i)
		case u.GetName() == "":
			return nil, fmt.Errorf("document %d (%s): no metadata.name", i, u.GetKind())
		}
		if _, err := schema.ParseGroupVersion(u.GetAPIVersion()); err != nil {
			return nil, fmt.Errorf("document %d: apiVersion %q: %w", i, u.GetAPIVersion(), err)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errors.New("no object in the manifest")
	}
	return out, nil
}

// waitCondition is a wait step's until: the object is gone ("delete"),
// has a condition of a status ("condition=Ready", "condition=Ready=False";
// the status defaults to True), or a JSONPath value ("jsonpath={.status.phase}=Running").
type waitCondition struct {
	gone            bool
	condition       string
	conditionStatus string
	path            *jsonpath.JSONPath
	value           string
}

func parseWaitCondition(until string) (*waitCondition, error) {
	switch {
	case until == "delete":
		return &waitCondition{gone: true}, nil
	case strings.HasPrefix(until, "condition="):
		c := strings.TrimPrefix(until, "condition=")
		name, status, ok := strings.Cut(c, "=")
		if !ok {
			status = "True"
		}
		if name == "" {
			return nil, errors.New("condition= needs a condition type")
		}
		return &waitCondition{condition: name, conditionStatus: status}, nil
	case strings.HasPrefix(until, "jsonpath="):
		expr := strings.TrimPrefix(until, "jsonpath=")
		i := strings.LastIndex(expr, "}=")
		if !strings.HasPrefix(expr, "{") || i < 0 {
			return nil, fmt.Errorf("jsonpath=%s: write jsonpath={.path}=value", expr)
		}
		p := jsonpath.New("until").AllowMissingKeys(true)
		if err := p.Parse(expr[:i+1]); err != nil {
			return nil, fmt.Errorf("jsonpath=%s: %w", expr, err)
		}
		return &waitCondition{path: p, value: expr[i+2:]}, nil
	}
	return nil, fmt.Errorf("until %q: write delete, condition=TYPE[=STATUS] or jsonpath={.path}=value", until)
}

// holds reports whether obj (nil when it does not exist) meets the condition.
func (w *waitCondition) holds(obj *unstructured.Unstructured) (bool, error) {
	if w.gone || obj == nil {
		return w.gone && obj == nil, nil
	}
	if w.condition != "" {
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if fmt.Sprint(m["type"]) == w.condition {
				return strings.EqualFold(fmt.Sprint(m["status"]), w.conditionStatus), nil
			}
		}
		return false, nil
	}
	var buf bytes.Buffer
	if err := w.path.Execute(&buf, obj.Object); err != nil {
		return false, nil // not there yet
	}
	return strings.TrimSpace(buf.String()) == w.value, nil
}

// splitObjectRef splits a wait step's object, "TYPE/NAME" ("pod/web-0",
// "pdb/budget", "priorityclasses.scheduling.k8s.io/high").
func splitObjectRef(ref string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(ref, "/")
	if !ok || typ == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("object %q: write TYPE/NAME, as kubectl does (pod/web-0)", ref)
	}
	return typ, name, nil
}

// objects is the stepRunner's dynamic access to the API, built on first
// use.
type objects struct {
	cfg    *rest.Config
	once   sync.Once
	err    error
	client dynamic.Interface
	mapper meta.RESTMapper
}

func (o *objects) init() error {
	o.once.Do(func() {
		if o.cfg == nil {
			o.err = errors.New("no admin client for this target")
			return
		}
		dc, err := discovery.NewDiscoveryClientForConfig(o.cfg)
		if err != nil {
			o.err = err
			return
		}
		cached := memory.NewMemCacheClient(dc)
		o.mapper = restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)
		o.client, o.err = dynamic.NewForConfig(o.cfg)
	})
	return o.err
}

// resource resolves an object's kind to its resource and scope.
func (o *objects) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("kind %s (%s): the API does not serve it: %w", gvk.Kind, gvk.GroupVersion(), err)
	}
	return m, nil
}

// create creates every object of the step's manifest, in order; a
// namespaced object without a namespace goes to the step's.
func (r *stepRunner) create(ctx context.Context, s Step) error {
	objs, err := parseManifest(s.Manifest)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if err := r.objects.init(); err != nil {
		return err
	}
	for _, u := range objs {
		m, err := r.objects.mapping(u.GroupVersionKind())
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = r.objects.client.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if u.GetNamespace() == "" {
				u.SetNamespace(r.ns(s))
			}
			if err := r.ensureNamespace(ctx, s, u.GetNamespace()); err != nil {
				return err
			}
			ri = r.objects.client.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// patchJSON reads a patch step's merge patch, JSON or YAML, as JSON.
func patchJSON(patch string) ([]byte, error) {
	if strings.TrimSpace(patch) == "" {
		return nil, errors.New("empty")
	}
	var obj map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(patch), 4096).Decode(&obj); err != nil {
		return nil, err
	}
	return json.Marshal(obj)
}

// resourceOf resolves a step's object, TYPE/NAME, to the client of its
// resource (in the step's namespace when namespaced) and its name.
func (r *stepRunner) resourceOf(s Step) (dynamic.ResourceInterface, string, error) {
	typ, name, err := splitObjectRef(s.Object)
	if err != nil {
		return nil, "", err
	}
	if err := r.objects.init(); err != nil {
		return nil, "", err
	}
	gvr, err := r.objects.mapper.ResourceFor(schema.ParseGroupResource(typ).WithVersion(""))
	if err != nil {
		return nil, "", fmt.Errorf("object type %q: %w", typ, err)
	}
	kind, err := r.objects.mapper.KindFor(gvr)
	if err != nil {
		return nil, "", fmt.Errorf("object type %q: %w", typ, err)
	}
	m, err := r.objects.mapping(kind)
	if err != nil {
		return nil, "", err
	}
	var ri dynamic.ResourceInterface = r.objects.client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = r.objects.client.Resource(m.Resource).Namespace(r.ns(s))
	}
	return ri, name, nil
}

// patch merge-patches the step's object.
func (r *stepRunner) patch(ctx context.Context, s Step) error {
	body, err := patchJSON(s.Patch)
	if err != nil {
		return fmt.Errorf("patch: %w", err)
	}
	ri, name, err := r.resourceOf(s)
	if err != nil {
		return err
	}
	if _, err := ri.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching %s: %w", s.Object, err)
	}
	return nil
}

// wait polls the step's object until its condition holds.
func (r *stepRunner) wait(ctx context.Context, s Step) error {
	cond, err := parseWaitCondition(s.Until)
	if err != nil {
		return err
	}
	ri, name, err := r.resourceOf(s)
	if err != nil {
		return err
	}
	// until delete waits for the object there at the first look to go, as
	// kubectl wait --for=delete does: one of the same name made after is
	// another object.
	var uid types.UID
	first := true
	return r.poll(ctx, s, func() (bool, error) {
		obj, err := ri.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			obj, err = nil, nil
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err):
			return false, fmt.Errorf("reading %s: %w", s.Object, err)
		case err != nil:
			return false, nil // the API may be cut off for a while
		}
		if first {
			first = false
			if obj != nil {
				uid = obj.GetUID()
			}
		}
		if cond.gone && obj != nil && uid != "" && obj.GetUID() != uid {
			obj = nil
		}
		return cond.holds(obj)
	})
}
