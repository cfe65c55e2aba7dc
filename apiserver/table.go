package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// tableRequest is a read that asked for a meta.k8s.io Table (Accept:
// application/json;as=Table;v=v1;g=meta.k8s.io, as kubectl get sends)
// rather than the objects. It is used by one request at a time.
type tableRequest struct {
	apiVersion string // meta.k8s.io/v1 or meta.k8s.io/v1beta1
	include    metav1.IncludeObjectPolicy
	// noHeaders leaves out the column definitions: a watch sends them
	// with its first event only, as kube-apiserver does.
	noHeaders bool
	now       func() time.Time
}

// tableRequested reads the Accept header and includeObject. It returns nil
// when the client wants objects: no Accept, or a plain media type before
// any Table one. The clauses are taken in order; one asking for a
// conversion the server does not make (a protobuf Table, another kind or
// version) is passed over. now is the clock ages are measured by.
func tableRequested(r *http.Request, now func() time.Time) (*tableRequest, error) {
	var t *tableRequest
	for _, clause := range strings.Split(r.Header.Get("Accept"), ",") {
		if strings.TrimSpace(clause) == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(clause)
		if err != nil {
			continue
		}
		if params["as"] == "" {
			return nil, nil
		}
		if params["as"] != "Table" || params["g"] != metav1.GroupName || (params["v"] != "v1" && params["v"] != "v1beta1") {
			continue
		}
		if mt == mediaJSON || mt == "application/*" || mt == "*/*" {
			t = &tableRequest{apiVersion: metav1.GroupName + "/" + params["v"], now: now}
			break
		}
	}
	if t == nil {
		return nil, nil
	}
	t.include = metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))
	switch t.include {
	case "", metav1.IncludeMetadata, metav1.IncludeNone, metav1.IncludeObject:
	default:
		err := field.Invalid(field.NewPath("includeObject"), t.include, "must be 'Metadata', 'Object', 'None', or empty")
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", err))
	}
	return t, nil
}

// table renders objects of res (their wire encodings) as a Table with
// list's metadata. Each row's object is as includeObject asks: the
// object's metadata as a PartialObjectMetadata (the default), the whole
// object, or nothing.
func (t *tableRequest) table(res *resourceInfo, encodings [][]byte, list metav1.ListMeta) (*metav1.Table, error) {
	p := printerFor(res.gvk.GroupKind())
	now := t.now()
	tab := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: t.apiVersion},
		ListMeta: list,
		Rows:     make([]metav1.TableRow, 0, len(encodings)),
	}
	if !t.noHeaders {
		tab.ColumnDefinitions = p.columns
	}
	for _, data := range encodings {
		obj, err := res.decodeStored(data)
		if err != nil {
			return nil, err
		}
		cells, conditions := p.cells(obj, now)
		row := metav1.TableRow{Cells: cells, Conditions: conditions}
		switch t.include {
		case metav1.IncludeObject:
			row.Object.Raw = data
		case metav1.IncludeNone:
		default:
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("reading the metadata of a %s: %w", res.kind, err))
			}
			partial := meta.AsPartialObjectMetadata(m)
			partial.APIVersion, partial.Kind = t.apiVersion, "PartialObjectMetadata"
			row.Object.Object = partial
		}
		tab.Rows = append(tab.Rows, row)
	}
	return tab, nil
}

// watchObject renders a watch event's object (its wire encoding) as a
// one-row Table; the first one carries the column definitions.
func (t *tableRequest) watchObject(res *resourceInfo, data []byte) ([]byte, error) {
	var rv string
	if obj, err := res.decodeStored(data); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			rv = m.GetResourceVersion()
		}
	}
	tab, err := t.table(res, [][]byte{data}, metav1.ListMeta{ResourceVersion: rv})
	if err != nil {
		return nil, err
	}
	t.noHeaders = true
	out, err := json.Marshal(tab)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encoding a Table of %s: %w", res.kind, err))
	}
	return out, nil
}
