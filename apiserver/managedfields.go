package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/clock"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Managed fields (metadata.managedFields) record which field manager owns
// which fields of an object, as kube-apiserver records them: every create,
// update and patch is an Update operation of its manager (the fieldManager
// parameter, or the first part of the User-Agent), and a server-side apply
// (apply.go) is an Apply operation that merges the applied configuration
// and refuses to take fields another manager owns unless forced.
//
// The bookkeeping is apimachinery's managedfields package, the one
// kube-apiserver's handlers drive (entries per manager, operation and
// subresource; at most ten Update entries before the oldest merge into
// "ancient-changes"; the last-applied annotation of client-side apply kept
// in step), over structured-merge-diff and type information from the
// OpenAPI schemas the server publishes.

// typeConverter is the structured-merge-diff type information of every
// served kind, from the OpenAPI v3 definitions the server publishes (the
// list and map semantics SSA merges by come with them), built once per
// process: the schemas are a function of the resource table.
var typeConverter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	reg, err := newRegistry(resourceTable)
	if err != nil {
		return nil, fmt.Errorf("managed fields: %w", err)
	}
	return newTypeConverter(reg)
})

// newTypeConverter builds the type information of reg's kinds.
func newTypeConverter(reg *registry) (managedfields.TypeConverter, error) {
	b := newSchemaBuilder(true, kindsOf(servedKind(reg)))
	for _, res := range reg.resources() {
		b.define(typeOfKind(res.gvk))
	}
	defs := make(map[string]*spec.Schema, len(b.defs))
	for name := range b.defs {
		s := b.defs[name]
		defs[name] = &s
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		return nil, fmt.Errorf("managed fields: %w", err)
	}
	return tc, nil
}

// fieldManagerKey names a field manager: one per kind and subresource, as
// kube-apiserver installs one per REST storage.
type fieldManagerKey struct {
	gvk         schema.GroupVersionKind
	subresource string
}

// fieldManagers are the field managers made so far, shared by every server
// of the process (they hold no per-server state).
var fieldManagers sync.Map // fieldManagerKey -> *managedfields.FieldManager

// fieldManagerFor returns the field manager of ri's resource and
// subresource.
func fieldManagerFor(ri *requestInfo) (*managedfields.FieldManager, error) {
	key := fieldManagerKey{gvk: ri.res.gvk, subresource: ri.subresource}
	if fm, ok := fieldManagers.Load(key); ok {
		return fm.(*managedfields.FieldManager), nil
	}
	tc, err := typeConverter()
	if err != nil {
		return nil, err
	}
	// Every served kind has one version, so the hub a managed set is
	// converted through is the kind's own group version.
	gv := ri.res.gvk.GroupVersion()
	fm, err := managedfields.NewDefaultFieldManager(tc, apiScheme, apiScheme, apiScheme, ri.res.gvk, gv,
		ri.subresource, resetFields(ri.res, ri.subresource))
	if err != nil {
		return nil, fmt.Errorf("managed fields of %s: %w", ri.res.gvk, err)
	}
	actual, _ := fieldManagers.LoadOrStore(key, fm)
	return actual.(*managedfields.FieldManager), nil
}

// resetFields are the fields a write through subresource does not change,
// so its manager does not come to own them, as the strategies'
// GetResetFields say upstream: the main resource of a kind with a status
// subresource keeps the stored status, and /status changes nothing but the
// status (podsafe's status writes keep the stored metadata too).
func resetFields(res *resourceInfo, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !res.hasSubresource(subStatus) {
		return nil
	}
	set := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	if subresource == subStatus {
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(res.apiVersion()): fieldpath.NewExcludeSetFilter(set),
	}
}

// writeManager is the field manager of a write, carried in its context.
type writeManager struct {
	name string
	// apply marks a server-side apply, whose Apply operation already
	// recorded the manager's fields: the write records no Update.
	apply bool
	// clock stamps the entries the write changes: the server's clock,
	// scaled in a scaled cluster, as creationTimestamp is.
	clock clock.PassiveClock
	// applied holds the managed fields of an apply's merged object, which
	// the written object takes even where it is not the merged object
	// itself (a status write keeps the stored metadata).
	applied *[]metav1.ManagedFieldsEntry
}

type writeManagerKey struct{}

// withWriteManager marks ctx's writes as made by manager.
func withWriteManager(ctx context.Context, manager writeManager) context.Context {
	return context.WithValue(ctx, writeManagerKey{}, manager)
}

// writeManagerFrom returns the manager of ctx's writes; ok is false for
// writes the server makes on its own, which record no manager.
func writeManagerFrom(ctx context.Context) (writeManager, bool) {
	m, ok := ctx.Value(writeManagerKey{}).(writeManager)
	return m, ok
}

// withFieldManager marks the writes of r (a create, update or non-apply
// patch) as made by the manager the fieldManager parameter names, or, as
// kube-apiserver does when it names none, by the first part of the
// User-Agent (kubectl-edit, kubectl-client-side-apply, kubelet). An
// invalid name is 422 naming the options kind (CreateOptions,
// UpdateOptions, PatchOptions).
func (s *Server) withFieldManager(r *http.Request, optionsKind string) (context.Context, error) {
	name := r.URL.Query().Get("fieldManager")
	if err := validateFieldManager(name, optionsKind); err != nil {
		return nil, err
	}
	if name == "" {
		name = prefixFromUserAgent(r.UserAgent())
	}
	return withWriteManager(r.Context(), writeManager{name: name, clock: s.clock}), nil
}

// validateFieldManager checks a fieldManager parameter as upstream's
// options validation does: at most 128 printable characters.
func validateFieldManager(name, optionsKind string) error {
	errs := metav1validation.ValidateFieldManager(name, field.NewPath("fieldManager"))
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "", errs)
	}
	return nil
}

// prefixFromUserAgent is the manager name of a User-Agent: what precedes
// its first "/", without unprintable characters, cut to the 128 bytes a
// manager name may have.
func prefixFromUserAgent(ua string) string {
	first, _, _ := strings.Cut(ua, "/")
	var b bytes.Buffer
	for _, r := range first {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// trackCreate records the creating manager's fields on obj, a new object
// about to be created, as an Update operation (kube-apiserver's create
// handler does the same). Managed fields the client sent are kept as the
// starting point, as upstream keeps them.
func trackCreate(ctx context.Context, ri *requestInfo, obj runtime.Object) {
	m, ok := writeManagerFrom(ctx)
	if !ok || m.apply {
		return
	}
	fm, err := fieldManagerFor(ri)
	if err != nil {
		return
	}
	copyManagedFields(obj, fm.UpdateNoErrors(ri.res.newObject(), obj, m.name))
	stampTimes(nil, obj, m.clock)
}

// trackUpdate records the writing manager's fields on out, the object
// about to replace cur, as an Update operation. A write that changes
// nothing but the times of managed fields entries keeps the stored times,
// so that it stays a no-op (as kube-apiserver's
// IgnoreManagedFieldsTimestampsTransformer keeps repeated applies from
// writing).
func trackUpdate(ctx context.Context, ri *requestInfo, cur, out runtime.Object) {
	m, ok := writeManagerFrom(ctx)
	if !ok {
		return
	}
	if !m.apply {
		fm, err := fieldManagerFor(ri)
		if err != nil {
			return
		}
		copyManagedFields(out, fm.UpdateNoErrors(cur, out, m.name))
		stampTimes(cur, out, m.clock)
	} else if m.applied != nil {
		if outMeta, err := metaOf(out); err == nil {
			outMeta.SetManagedFields(*m.applied)
		}
	}
	keepNoopTimes(cur, out)
}

// copyManagedFields gives obj the managed fields of from (the field
// manager's answer, which is obj itself unless it had to copy it).
func copyManagedFields(obj, from runtime.Object) {
	if obj == from {
		return
	}
	objMeta, err1 := metaOf(obj)
	fromMeta, err2 := metaOf(from)
	if err1 == nil && err2 == nil {
		objMeta.SetManagedFields(fromMeta.GetManagedFields())
	}
}

// stampTimes sets the time of every managed fields entry of out that is
// new or newer than its entry in cur (nil for a create) to clk's now: the
// field manager stamps them with the wall clock, and a scaled cluster's
// objects carry its scaled time everywhere else.
func stampTimes(cur, out runtime.Object, clk clock.PassiveClock) {
	if clk == nil {
		return
	}
	outMeta, err := metaOf(out)
	if err != nil {
		return
	}
	type entryKey struct {
		manager, subresource string
		op                   metav1.ManagedFieldsOperationType
	}
	before := map[entryKey]*metav1.Time{}
	if cur != nil {
		if curMeta, err := metaOf(cur); err == nil {
			for _, e := range curMeta.GetManagedFields() {
				before[entryKey{e.Manager, e.Subresource, e.Operation}] = e.Time
			}
		}
	}
	mf := outMeta.GetManagedFields()
	now := metav1.NewTime(clk.Now().UTC().Truncate(time.Second))
	changed := false
	for i := range mf {
		old, ok := before[entryKey{mf[i].Manager, mf[i].Subresource, mf[i].Operation}]
		if ok && old.Equal(mf[i].Time) {
			continue
		}
		mf[i].Time = now.DeepCopy()
		changed = true
	}
	if changed {
		outMeta.SetManagedFields(mf)
	}
}

// ignoringTimes is the semantic equality with managed fields entries
// compared without their times.
var ignoringTimes = func() conversion.Equalities {
	eq := apiequality.Semantic.Copy()
	if err := eq.AddFuncs(func(a, b metav1.ManagedFieldsEntry) bool {
		a.Time, b.Time = nil, nil
		return reflect.DeepEqual(a, b)
	}); err != nil {
		panic(fmt.Sprintf("apiserver: %v", err))
	}
	return eq
}()

// keepNoopTimes gives out the managed fields of cur when out differs from
// cur in nothing but the times of its entries.
func keepNoopTimes(cur, out runtime.Object) {
	curMeta, err1 := metaOf(cur)
	outMeta, err2 := metaOf(out)
	if err1 != nil || err2 != nil {
		return
	}
	curMF, outMF := curMeta.GetManagedFields(), outMeta.GetManagedFields()
	if len(curMF) != len(outMF) || len(outMF) == 0 || !ignoringTimes.DeepEqual(curMF, outMF) {
		return
	}
	outMeta.SetManagedFields(curMF)
	if !ignoringTimes.DeepEqual(cur, out) {
		outMeta.SetManagedFields(outMF)
	}
}
