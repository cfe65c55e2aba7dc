package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// servePatch answers PATCH on an object, its status or its scale. The patch
// is applied to the stored object inside the compare-and-swap loop, so a
// concurrent write makes it apply again to the newer object rather than
// overwrite it.
func (s *Server) servePatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	ctx := r.Context()
	validation, err := fieldValidation(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mt, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, err)
		return
	}
	patch, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := checkPatch(mt, patch); err != nil {
		writeError(w, err)
		return
	}
	if mt == mediaApplyPatch {
		s.serveApply(w, r, ri, patch, validation)
		return
	}
	if err := checkForce(r); err != nil {
		writeError(w, err)
		return
	}
	// The patch's manager records its fields as an Update.
	if ctx, err = s.withFieldManager(r, patchOptionsKind); err != nil {
		writeError(w, err)
		return
	}
	if ri.subresource == subScale {
		out, err := s.updateScale(ctx, ri, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			obj, _, err := patchObject(mt, cur, patch, &autoscalingv1.Scale{}, validation)
			if err != nil {
				return nil, err
			}
			return obj.(*autoscalingv1.Scale), nil
		})
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	var warnings []string
	out, err := s.guaranteedUpdate(ctx, ri.res, ri.key(), func(cur runtime.Object, curRV uint64) (runtime.Object, error) {
		upd, warns, err := patchObject(mt, cur, patch, ri.res.newObject(), validation)
		if err != nil {
			return nil, err
		}
		warnings = warns
		return s.preparePatched(ctx, ri, cur, curRV, upd)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeWarnings(w, warnings)
	writeObject(w, http.StatusOK, ri.res, out)
}

// checkPatch refuses unsupported patch types (415) and malformed patches
// (400) before anything is read from the store.
func checkPatch(mt string, patch []byte) error {
	switch mt {
	case mediaMergePatch, mediaStrategicPatch:
		var m map[string]any
		if err := json.Unmarshal(patch, &m); err != nil || m == nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the %s body is not a JSON object: %v", mt, err))
		}
	case mediaJSONPatch:
		if _, err := jsonpatch.DecodePatch(patch); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the %s body is not a JSON patch: %v", mt, err))
		}
	case mediaApplyPatch:
		// Decoded by apply, which says what is wrong with it.
	case mediaApplyPatchCBOR:
		e := unsupportedMediaType(mt)
		e.(*apierrors.StatusError).ErrStatus.Message = fmt.Sprintf(
			"server-side apply as CBOR (%s) is not supported: send the configuration as %s", mt, mediaApplyPatch)
		return e
	default:
		e := unsupportedMediaType(mt)
		e.(*apierrors.StatusError).ErrStatus.Message = fmt.Sprintf(
			"the patch type %q is not supported: send a %s, %s, %s or %s", mt, mediaMergePatch, mediaJSONPatch, mediaStrategicPatch, mediaApplyPatch)
		return e
	}
	return nil
}

// patchObject applies patch (of media type mt) to cur and decodes the
// result into a new object like into, with the field validation mode.
func patchObject(mt string, cur runtime.Object, patch []byte, into runtime.Object, validation string) (runtime.Object, []string, error) {
	original, err := json.Marshal(cur)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	gvk := cur.GetObjectKind().GroupVersionKind()
	var name string
	if m, err := metaOf(cur); err == nil {
		name = m.GetName()
	}
	var patched []byte
	switch mt {
	case mediaMergePatch:
		patched, err = jsonpatch.MergePatch(original, patch)
	case mediaJSONPatch:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(patch); err != nil {
			break
		}
		// One operation at a time, as Apply does, to say which failed.
		patched = original
		for i, op := range p {
			next, opErr := jsonpatch.Patch{op}.Apply(patched)
			if opErr != nil {
				path, _ := op.Path()
				return nil, nil, patchFailed(gvk.GroupKind(), name, fieldOfPointer(path),
					fmt.Sprintf("operation %d of the JSON patch (%s %s) failed: %v", i, op.Kind(), path, opErr))
			}
			patched = next
		}
	case mediaStrategicPatch:
		patched, err = strategicpatch.StrategicMergePatch(original, patch, into)
	default:
		return nil, nil, unsupportedMediaType(mt)
	}
	if err != nil {
		return nil, nil, patchFailed(gvk.GroupKind(), name, "", fmt.Sprintf("applying the %s: %v", mt, err))
	}
	return decodeObject(patched, gvk, validation)
}

// fieldOfPointer writes a JSON pointer (/spec/containers/0/image) as the
// field path of a Status cause (spec.containers[0].image).
func fieldOfPointer(pointer string) string {
	var b strings.Builder
	for i, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch {
		case tok == "" && i == 0:
		case isIndex(tok):
			b.WriteString("[" + tok + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
	}
	return b.String()
}

// isIndex reports whether tok is a list index (or "-", the end of a list).
func isIndex(tok string) bool {
	if tok == "-" {
		return true
	}
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// preparePatched prepares upd, the stored object cur (at curRV) with a
// patch or an applied configuration merged in, as an update: a
// resourceVersion the patch carries is a precondition.
func (s *Server) preparePatched(ctx context.Context, ri *requestInfo, cur runtime.Object, curRV uint64, upd runtime.Object) (runtime.Object, error) {
	m, err := metaOf(upd)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if rv, err := parseRV(m.GetResourceVersion()); err != nil {
		return nil, err
	} else if rv != 0 && rv != curRV {
		return nil, conflict(ri.res.gr, ri.name)
	}
	return s.prepareUpdate(ctx, ri, VerbPatch, cur, upd)
}
