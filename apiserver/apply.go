package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// Server-side apply (PATCH with application/apply-patch+yaml; kubectl
// apply --server-side): the body is a partial object, the configuration
// its field manager wants; it is merged into the stored object, the
// manager comes to own exactly the fields it applied (fields it applied
// before and leaves out now are removed, unless another manager owns them
// too), and a field another manager owns with a different value is a 409
// listing each conflict, unless force takes them over. Applying to an
// object that does not exist creates it. As every patch, it runs inside
// the compare-and-swap loop, so a concurrent write makes it merge again
// with the newer object.

// patchOptionsKind names the options of a patch in its 422s.
const patchOptionsKind = "PatchOptions"

// applyOptions are the parameters of an apply.
type applyOptions struct {
	manager string
	force   bool
}

// applyOptionsOf reads an apply's fieldManager (required, as upstream
// requires it: a controller must name itself) and force.
func applyOptionsOf(r *http.Request) (applyOptions, error) {
	q := r.URL.Query()
	opts := applyOptions{manager: q.Get("fieldManager")}
	if opts.manager == "" {
		return opts, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: patchOptionsKind}, "", field.ErrorList{
			field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	if err := validateFieldManager(opts.manager, patchOptionsKind); err != nil {
		return opts, err
	}
	if v := q.Get("force"); v != "" {
		force, err := strconv.ParseBool(v)
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("force: invalid value %q: use true or false", v))
		}
		opts.force = force
	}
	return opts, nil
}

// checkForce refuses force on a patch that is not an apply (422), as
// upstream's options validation does.
func checkForce(r *http.Request) error {
	if _, ok := r.URL.Query()["force"]; !ok {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: patchOptionsKind}, "", field.ErrorList{
		field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")})
}

// applyConfiguration decodes an apply body (YAML or JSON) into the
// partial object it configures, which must be of ri's kind. Duplicate
// fields are refused under fieldValidation=Strict and warned of under
// Warn; unknown fields are refused when the configuration is merged.
func applyConfiguration(body []byte, ri *requestInfo, validation string) (*unstructured.Unstructured, []string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf(
			"the apply configuration is empty: send the fields of the %s to apply, with apiVersion %s and kind %s",
			ri.res.kind, ri.res.apiVersion(), ri.res.kind))
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: the apply configuration is not YAML: %v", err))
	}
	cfg := &unstructured.Unstructured{Object: map[string]any{}}
	if err := json.Unmarshal(js, &cfg.Object); err != nil || cfg.Object == nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf(
			"error decoding patch: the apply configuration is not a YAML object (a %s with apiVersion and kind)", ri.res.kind))
	}
	if gvk := cfg.GroupVersionKind(); gvk != ri.res.gvk {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf(
			"invalid object type: %s: the apply configuration must have apiVersion %s and kind %s",
			describeGVK(cfg), ri.res.apiVersion(), ri.res.kind))
	}
	var warnings []string
	if validation != validationIgnore {
		if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
			if validation == validationStrict {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
			}
			warnings = append(warnings, err.Error())
		}
	}
	return cfg, warnings, nil
}

// describeGVK says what apiVersion and kind an apply configuration has.
func describeGVK(cfg *unstructured.Unstructured) string {
	av, kind := cfg.GetAPIVersion(), cfg.GetKind()
	switch {
	case av == "" && kind == "":
		return "no apiVersion and no kind"
	case av == "":
		return fmt.Sprintf("kind %s without an apiVersion", kind)
	case kind == "":
		return fmt.Sprintf("apiVersion %s without a kind", av)
	}
	return fmt.Sprintf("apiVersion %s, kind %s", av, kind)
}

// serveApply answers a server-side apply of body to ri's object.
func (s *Server) serveApply(w http.ResponseWriter, r *http.Request, ri *requestInfo, body []byte, validation string) {
	out, code, warnings, err := s.apply(r, ri, body, validation)
	if err != nil {
		writeError(w, err)
		return
	}
	writeWarnings(w, warnings)
	writeObject(w, code, ri.res, out)
}

// apply merges the configuration body into ri's object, or creates the
// object from it when there is none (the main resource only, as upstream:
// a status is applied to an object that exists). It returns the object as
// stored and 200, or 201 when it was created.
func (s *Server) apply(r *http.Request, ri *requestInfo, body []byte, validation string) (runtime.Object, int, []string, error) {
	if ri.subresource == subScale {
		e := unsupportedMediaType(mediaApplyPatch)
		e.(*apierrors.StatusError).ErrStatus.Message = fmt.Sprintf(
			"server-side apply to the scale subresource is not supported: patch %s's spec.replicas with a %s, or apply to the %s itself",
			ri.res.kind, mediaMergePatch, ri.res.kind)
		return nil, 0, nil, e
	}
	opts, err := applyOptionsOf(r)
	if err != nil {
		return nil, 0, nil, err
	}
	cfg, warnings, err := applyConfiguration(body, ri, validation)
	if err != nil {
		return nil, 0, nil, err
	}
	fm, err := fieldManagerFor(ri)
	if err != nil {
		return nil, 0, nil, apierrors.NewInternalError(err)
	}
	var applied []metav1.ManagedFieldsEntry
	merge := func(live runtime.Object) (runtime.Object, error) {
		out, err := fm.Apply(live, cfg.DeepCopy(), opts.manager, opts.force)
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, err
			}
			return nil, apierrors.NewBadRequest(err.Error())
		}
		stampTimes(live, out, s.clock)
		if m, err := metaOf(out); err == nil {
			applied = m.GetManagedFields()
		}
		return out, nil
	}
	ctx := withWriteManager(r.Context(), writeManager{name: opts.manager, apply: true, clock: s.clock, applied: &applied})
	for attempt := 0; ; attempt++ {
		out, err := s.guaranteedUpdate(ctx, ri.res, ri.key(), func(cur runtime.Object, curRV uint64) (runtime.Object, error) {
			upd, err := merge(cur)
			if err != nil {
				return nil, err
			}
			return s.preparePatched(ctx, ri, cur, curRV, upd)
		})
		if !apierrors.IsNotFound(err) || ri.subresource != "" || attempt >= s.cfg.MaxConflictRetries {
			return out, http.StatusOK, warnings, err
		}
		out, err = s.applyCreate(ctx, ri, merge)
		if err == nil {
			return out, http.StatusCreated, warnings, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, 0, nil, err
		}
		// Another writer created it first: apply to theirs.
	}
}

// applyCreate creates ri's object from an apply configuration merged into
// an empty object.
func (s *Server) applyCreate(ctx context.Context, ri *requestInfo, merge func(runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	obj, err := merge(ri.res.newObject())
	if err != nil {
		return nil, err
	}
	m, err := metaOf(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetName() != ri.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf(
			"the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), ri.name))
	}
	if uid := m.GetUID(); uid != "" {
		return nil, apierrors.NewConflict(ri.res.gr, ri.name, fmt.Errorf(
			"uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	}
	if err := checkNamespace(ri, m); err != nil {
		return nil, err
	}
	return s.createObject(ctx, ri, obj, m)
}
