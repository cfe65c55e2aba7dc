package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// apiScheme knows every k8s.io/api type; the server only reads it.
var apiScheme = clientgoscheme.Scheme

// bodyDecoder decodes JSON, YAML and protobuf request bodies. It is strict:
// unknown and duplicate fields come back as a strict decoding error next to
// the decoded object, and the fieldValidation parameter decides what to do
// with them.
var bodyDecoder = serializer.NewCodecFactory(apiScheme, serializer.EnableStrict).UniversalDeserializer()

// Media types the server reads and writes.
const (
	mediaJSON           = "application/json"
	mediaYAML           = "application/yaml"
	mediaProtobuf       = "application/vnd.kubernetes.protobuf"
	mediaMergePatch     = "application/merge-patch+json"
	mediaJSONPatch      = "application/json-patch+json"
	mediaStrategicPatch = "application/strategic-merge-patch+json"
	mediaApplyPatch     = "application/apply-patch+yaml"
	mediaApplyPatchCBOR = "application/apply-patch+cbor"
)

// maxBodyBytes bounds a request body, like kube-apiserver's 3 MiB limit.
const maxBodyBytes = 3 << 20

// Field validation modes (the fieldValidation query parameter).
const (
	validationIgnore = "Ignore"
	validationWarn   = "Warn"
	validationStrict = "Strict"
)

// fieldValidation reads the fieldValidation parameter; empty means Warn, as
// in kube-apiserver.
func fieldValidation(r *http.Request) (string, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "":
		return validationWarn, nil
	case validationIgnore, validationWarn, validationStrict:
		return v, nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("invalid fieldValidation %q: use Ignore, Warn or Strict", v))
	}
}

// readBody reads a request body of at most maxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if len(body) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("request body is larger than %d bytes", maxBodyBytes))
	}
	return body, nil
}

// mediaType returns the media type of a Content-Type header, lower-cased and
// without parameters; an empty header is JSON.
func mediaType(header string) (string, error) {
	if header == "" {
		return mediaJSON, nil
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return "", unsupportedMediaType(header)
	}
	return mt, nil
}

// unsupportedMediaType is the 415 Status for a body the server cannot read.
func unsupportedMediaType(contentType string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format %q: send %s, %s or %s",
			contentType, mediaJSON, mediaYAML, mediaProtobuf),
	}}
}

// decodeBody decodes an object body (JSON, YAML or protobuf) into a new
// object of kind want. Unknown fields are refused under fieldValidation=Strict
// and returned as warnings under Warn.
func decodeBody(r *http.Request, want schema.GroupVersionKind, validation string) (runtime.Object, []string, error) {
	mt, err := mediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, err
	}
	switch mt {
	case mediaJSON, mediaYAML, mediaProtobuf:
	default:
		return nil, nil, unsupportedMediaType(mt)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the request body is empty: send a %s", want.Kind))
	}
	return decodeObject(body, want, validation)
}

// decodeObject decodes data (JSON, YAML or protobuf) into a new object of
// kind want, applying the field validation mode.
func decodeObject(data []byte, want schema.GroupVersionKind, validation string) (runtime.Object, []string, error) {
	into, err := apiScheme.New(want)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	obj, gvk, err := bodyDecoder.Decode(data, &want, into)
	var warnings []string
	if err != nil {
		if !runtime.IsStrictDecodingError(err) || obj == nil {
			return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("decoding %s: %v", want.Kind, err))
		}
		switch validation {
		case validationStrict:
			return nil, nil, apierrors.NewBadRequest(err.Error())
		case validationWarn:
			if strict, ok := runtime.AsStrictDecodingError(err); ok {
				for _, e := range strict.Errors() {
					warnings = append(warnings, e.Error())
				}
			} else {
				warnings = []string{err.Error()}
			}
		}
	}
	if gvk != nil && gvk.GroupKind() != want.GroupKind() {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the body is a %s, not a %s", gvk.GroupKind(), want.GroupKind()))
	}
	if gvk != nil && gvk.Version != want.Version {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("the body has apiVersion %s; this endpoint serves %s",
			gvk.GroupVersion(), want.GroupVersion()))
	}
	obj.GetObjectKind().SetGroupVersionKind(want)
	return obj, warnings, nil
}

// decodeStored decodes a stored object of the resource.
func (r *resourceInfo) decodeStored(data []byte) (runtime.Object, error) {
	obj := r.newObject()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decoding stored %s: %w", r.kind, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	return obj, nil
}

// encodeForStore encodes obj as stored: with kind and apiVersion and without
// the fields the server does not keep (selfLink; managed fields are kept,
// as kube-apiserver stores them).
func (r *resourceInfo) encodeForStore(obj runtime.Object) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(r.gvk)
	if m, err := metaOf(obj); err == nil {
		m.SetSelfLink("")
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encoding %s: %w", r.kind, err))
	}
	return data, nil
}

// metaOf returns the object metadata of obj.
func metaOf(obj runtime.Object) (metav1.Object, error) {
	return meta.Accessor(obj)
}

// parseRV parses a resourceVersion; "" is 0.
func parseRV(rv string) (uint64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: it is a decimal number", rv))
	}
	return n, nil
}

// writeJSON writes v as a JSON response with the given status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(statusOf(apierrors.NewInternalError(fmt.Errorf("encoding response: %w", err))))
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// writeObject writes a typed object of res with kind and apiVersion set.
func writeObject(w http.ResponseWriter, code int, res *resourceInfo, obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(res.gvk)
	writeJSON(w, code, obj)
}

// wireEncoding returns a stored encoding ready to send. Stored objects carry
// kind and apiVersion (sorted first by the store), so they go out as they
// are; one that does not is decoded and encoded again with them.
func (r *resourceInfo) wireEncoding(data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, []byte(`{"apiVersion":`)) {
		return data, nil
	}
	obj, err := r.decodeStored(data)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encoding %s: %w", r.kind, err))
	}
	return out, nil
}

// writeStored writes a stored encoding as the answer.
func writeStored(w http.ResponseWriter, code int, res *resourceInfo, data []byte) {
	data, err := res.wireEncoding(data)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
