package applier

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
)

// resource is the dynamic client for a tracked object's resource and namespace.
func (a *Applier) resource(t *tracked) dynamic.ResourceInterface {
	r := a.dyn.Resource(t.gvr)
	if t.namespaced {
		return r.Namespace(t.obj.Object.GetNamespace())
	}
	return r
}

// get reads the member object of t; nil without error when it does not exist.
func (a *Applier) get(ctx context.Context, t *tracked) (*unstructured.Unstructured, error) {
	u, err := a.resource(t).Get(ctx, t.obj.Object.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", t.obj.Key(), err)
	}
	return u, nil
}

// ssa server-side applies obj as Flotilla's field manager.
func (a *Applier) ssa(ctx context.Context, t *tracked, obj *unstructured.Unstructured, force, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return a.resource(t).Apply(ctx, obj.GetName(), obj, opts)
}

// compare returns how the member object live differs from the manifest of t
// (desired is the manifest with Flotilla's marks, as it would be applied).
//
// PartialComparison dry-runs the apply against live and compares the outcome
// with live: only fields the manifest sets can differ, and server defaults
// and webhooks are applied as they would be. FullComparison dry-runs the
// creation of the manifest as a new object and compares that with live, so
// that fields set on the member but not by the manifest differ too.
func (a *Applier) compare(ctx context.Context, t *tracked, desired, live *unstructured.Unstructured, opt api.ComparisonOptionType) ([]api.PatchDetail, error) {
	if opt == api.ComparisonOptionTypeFullComparison {
		return a.compareFull(ctx, t, desired, live)
	}
	predicted, err := a.ssa(ctx, t, desired, true, true)
	switch {
	case apierrors.IsInvalid(err):
		// The manifest cannot be applied to this object (an immutable
		// field differs, say): compare the fields the manifest sets
		// directly, without server defaults.
		d, cerr := diff.Compare(t.obj.Object, live)
		if cerr != nil {
			return nil, cerr
		}
		return onlyHubFields(d), nil
	case err != nil:
		return nil, fmt.Errorf("dry-run apply %s: %w", t.obj.Key(), err)
	}
	return diff.Compare(predicted, live)
}

// compareFull compares live with the object the manifest alone would create.
func (a *Applier) compareFull(ctx context.Context, t *tracked, desired, live *unstructured.Unstructured) ([]api.PatchDetail, error) {
	fresh := a.dryRunCreate(ctx, t, desired)
	if fresh == nil {
		// The member refuses a renamed copy (a CRD's name is fixed by
		// its spec, say): compare with the manifest as written.
		fresh = t.obj.Object.DeepCopy()
	}
	member := live.DeepCopy()
	diff.DropAllocated(fresh, t.obj.Object)
	diff.DropAllocated(member, t.obj.Object)
	return diff.Compare(fresh, member)
}

// dryRunCreate returns the object the member would create from desired under
// a generated name (defaults and admission applied), or nil if it refuses.
func (a *Applier) dryRunCreate(ctx context.Context, t *tracked, desired *unstructured.Unstructured) *unstructured.Unstructured {
	u := desired.DeepCopy()
	u.SetName("")
	u.SetGenerateName("flotilla-compare-")
	created, err := a.resource(t).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager})
	if err != nil {
		a.log.Debug("dry-run create for full comparison refused; comparing with the manifest as written",
			"object", t.obj.Key().String(), "err", err)
		return nil
	}
	created.SetName(desired.GetName())
	created.SetGenerateName(desired.GetGenerateName())
	return created
}

// onlyHubFields keeps the differences in fields the hub sets.
func onlyHubFields(details []api.PatchDetail) []api.PatchDetail {
	out := details[:0:0]
	for _, d := range details {
		if d.ValueInHub != "" {
			out = append(out, d)
		}
	}
	return out
}
