package apiserver

import (
	"fmt"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// selector is a parsed labelSelector plus fieldSelector, with the name a
// single-object URL or a metadata.name field selector pins.
type selector struct {
	res    *resourceInfo
	labels labels.Selector
	fields fields.Selector
}

// parseSelector reads labelSelector and fieldSelector from q and checks the
// field selector names fields the resource supports.
func parseSelector(res *resourceInfo, q url.Values) (*selector, error) {
	sel := &selector{res: res, labels: labels.Everything(), fields: fields.Everything()}
	if s := q.Get("labelSelector"); s != "" {
		ls, err := labels.Parse(s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid labelSelector %q: %v", s, err))
		}
		sel.labels = ls
	}
	if s := q.Get("fieldSelector"); s != "" {
		fs, err := fields.ParseSelector(s)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid fieldSelector %q: %v", s, err))
		}
		supported := res.supportedFields()
		for _, req := range fs.Requirements() {
			if !contains(supported, req.Field) {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %q is not a known field selector of %s: use one of %s",
					req.Field, res.resource, quoteAll(supported)))
			}
		}
		sel.fields = fs
	}
	return sel, nil
}

// empty reports whether the selector matches everything.
func (sel *selector) empty() bool { return sel.labels.Empty() && sel.fields.Empty() }

// matches reports whether obj is selected.
func (sel *selector) matches(obj runtime.Object) bool {
	if sel.empty() {
		return true
	}
	m, err := metaOf(obj)
	if err != nil {
		return false
	}
	if !sel.labels.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	return sel.fields.Empty() || sel.fields.Matches(sel.res.fieldSet(obj))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
