package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// ownedRef is a member object found carrying a placement's mark.
type ownedRef struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	key        manifest.Key
	uid        types.UID
	wave       int
}

// Delete removes what a placement owns on the member, answering a tombstone:
// with the Delete policy (default) it deletes the objects only this placement
// owns, in reverse dependency order, and takes this placement's mark off
// objects others co-own; with Abandon it only takes the marks off. It never
// touches an object the placement does not own, and keeps (unmarked) a
// namespace or CRD that still holds objects the placement does not own, since
// deleting it would delete them too. The error wraps ErrUnreachable when the
// member cannot be reached; a failed run can simply be repeated.
func (a *Applier) Delete(ctx context.Context, placementName string, strategy api.DeleteStrategy) (*events.WorkReported, error) {
	p := a.state(placementName)
	p.mu.Lock()
	defer p.mu.Unlock()

	report := &events.WorkReported{Cluster: a.cluster, Placement: placementName}
	if p.work != nil {
		report.ResourceIndex, report.Generation = p.work.ResourceIndex, p.work.Generation
	}
	fail := func(err error) (*events.WorkReported, error) {
		if unreachable(err) && !errors.Is(err, ErrUnreachable) {
			// The member went away in the middle: say so, as a probe would.
			err = fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		report.Applied = events.Condition{Status: statusFalse, Reason: api.ApplyFailedReason,
			Message: fmt.Sprintf("Failed to remove the placement's objects from the member: %v", err)}
		report.Available = events.Condition{Status: statusUnknown, Reason: api.AvailableUnknownReason}
		report.ObservedAt = a.now().UTC()
		return report, fmt.Errorf("delete placement %s: %w", placementName, err)
	}
	if err := a.probe(ctx); err != nil {
		return fail(err)
	}
	refs, err := a.scanOwned(ctx, placementName)
	if err != nil {
		return fail(err)
	}
	retained, err := a.removeOwned(ctx, placementName, refs, strategy.PropagationPolicy)
	if err != nil {
		return fail(err)
	}
	a.forget(placementName)

	report.Deleted = true
	report.Manifests = retained
	removed := len(refs) - len(retained)
	if strategy.PropagationPolicy == api.DeletePropagationPolicyAbandon {
		report.Applied = events.Condition{Status: statusTrue, Reason: AbandonedReason,
			Message: fmt.Sprintf("Left %d object(s) on the member without the placement's ownership", len(refs))}
	} else {
		msg := fmt.Sprintf("Removed %d object(s) the placement owned", removed)
		if len(retained) > 0 {
			msg += fmt.Sprintf("; kept %d that still hold objects the placement does not own", len(retained))
		}
		report.Applied = events.Condition{Status: statusTrue, Reason: DeletedReason, Message: msg}
	}
	report.ObservedAt = a.now().UTC()
	return report, nil
}

// pruneStale removes the objects the placement owns that its new desired
// state no longer lists, and reports whether it did. It is skipped when a
// manifest could not be decoded (its object cannot be told apart from a stale
// one) or the member is unreachable.
func (r *run) pruneStale(ctx context.Context, prev map[manifest.Key]*tracked, scan <-chan scanResult) (bool, error) {
	if r.strategy.Type == api.ApplyStrategyTypeReportDiff {
		return true, nil
	}
	if r.unreachable.Load() || (scan == nil && !r.p.scanned) {
		return false, nil
	}
	want := map[manifest.Key]bool{}
	for _, t := range r.objects {
		if t.obj.Object == nil || t.obj.Reason == api.ManifestDecodingErredReason {
			return false, nil
		}
		want[t.obj.Key()] = true
	}
	var stale []ownedRef
	seen := map[types.UID]bool{}
	add := func(ref ownedRef) {
		if !want[ref.key] && !seen[ref.uid] {
			seen[ref.uid] = true
			stale = append(stale, ref)
		}
	}
	if scan != nil {
		res := <-scan
		if res.err != nil {
			return false, res.err
		}
		r.p.scanned = true
		for _, ref := range res.refs {
			add(ref)
		}
	}
	// And what the previous run applied: one of its objects re-created
	// since (Recheck) may be newer than the search this run was given.
	for k, t := range prev {
		if t.owned && t.mapped && t.live != nil {
			add(ownedRef{gvr: t.gvr, namespaced: t.namespaced, key: k, uid: t.live.GetUID(), wave: t.obj.Wave})
		}
	}
	if len(stale) == 0 {
		return true, nil
	}
	// An object the placement no longer selects is deleted whatever the
	// deleteStrategy, which upstream applies to the placement's deletion only.
	if _, err := r.a.removeOwned(ctx, r.w.Placement, stale, api.DeletePropagationPolicyDelete); err != nil {
		return false, err
	}
	return true, nil
}

// removeOwned deletes (or with Abandon releases) refs in reverse wave order
// and returns the results for objects kept.
func (a *Applier) removeOwned(ctx context.Context, placementName string, refs []ownedRef, policy api.DeletePropagationPolicy) ([]events.ManifestResult, error) {
	var (
		mu       sync.Mutex
		errs     []error
		retained []events.ManifestResult
	)
	note := func(res *events.ManifestResult, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if res != nil {
			retained = append(retained, *res)
		}
	}
	waves := manifest.ByWave(refs, func(r ownedRef) int { return r.wave })
	slices.Reverse(waves)
	for _, wave := range waves {
		forEach(ctx, a.workers, wave, func(ref ownedRef) {
			note(a.removeOne(ctx, placementName, ref, policy))
		})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(retained, func(x, y events.ManifestResult) int {
		return strings.Compare(manifest.KeyOf(x.Resource).String(), manifest.KeyOf(y.Resource).String())
	})
	return retained, errors.Join(errs...)
}

// removeOne deletes or releases one object, re-reading it first under its
// lock so that a concurrent change of ownership is respected.
func (a *Applier) removeOne(ctx context.Context, placementName string, ref ownedRef, policy api.DeletePropagationPolicy) (*events.ManifestResult, error) {
	defer a.objLocks.lock(ref.key)()
	live, err := a.refResource(ref).Get(ctx, ref.key.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s before removing it: %w", ref.key, err)
	}
	owners := manifest.OwnerTokens(live.GetLabels())
	if !manifest.OwnedBy(live.GetLabels(), placementName) || live.GetUID() != ref.uid {
		return nil, nil // not ours (any more): leave it alone
	}
	// An object co-owned (by another placement, from before placements
	// stopped sharing, or by ownerReferences allowCoOwnership accepted) is
	// released, as upstream drops its ownership of such an object.
	if policy == api.DeletePropagationPolicyAbandon || len(owners) > 1 || len(live.GetOwnerReferences()) > 0 {
		return nil, a.release(ctx, ref, live, placementName)
	}
	if why, err := a.holdsOthers(ctx, ref, placementName); err != nil {
		return nil, err
	} else if why != "" {
		if err := a.release(ctx, ref, live, placementName); err != nil {
			return nil, err
		}
		gvk := live.GroupVersionKind()
		a.log.Info("kept an object instead of deleting it", "object", ref.key.String(), "reason", why)
		return &events.ManifestResult{
			Resource: api.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Name: ref.key.Name, Namespace: ref.key.Namespace},
			Applied: events.Condition{Status: statusTrue, Reason: RetainedReason,
				Message: fmt.Sprintf("Not deleted because %s; the placement's ownership was removed", why)},
		}, nil
	}
	uid := ref.uid
	background := metav1.DeletePropagationBackground
	err = a.refResource(ref).Delete(ctx, ref.key.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &background,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil, nil // gone, or replaced by an object that is not ours
	}
	if err != nil {
		return nil, fmt.Errorf("delete %s: %w", ref.key, err)
	}
	return nil, nil
}

// refResource is the dynamic client for ref's resource and namespace.
func (a *Applier) refResource(ref ownedRef) dynamic.ResourceInterface {
	r := a.dyn.Resource(ref.gvr)
	if ref.namespaced {
		return r.Namespace(ref.key.Namespace)
	}
	return r
}

// release takes placementName's ownership off live: the other owners stay
// marked; with none left, every Flotilla mark goes.
func (a *Applier) release(ctx context.Context, ref ownedRef, live *unstructured.Unstructured, placementName string) error {
	own := manifest.OwnerLabel(placementName)
	labels := map[string]any{own: nil}
	if rest := slices.DeleteFunc(manifest.OwnerTokens(live.GetLabels()), func(o string) bool {
		return manifest.OwnerLabel(o) == own
	}); len(rest) == 0 {
		labels[manifest.ManagedByLabel] = nil
		labels[manifest.ManifestHashLabel] = nil
	}
	patch := map[string]any{"metadata": map[string]any{"labels": labels}}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = a.refResource(ref).Patch(ctx, ref.key.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove placement %s's ownership of %s: %w", placementName, ref.key, err)
	}
	return nil
}

// listable is a resource whose objects can be listed and deleted.
type listable struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// resources lists the member's resources that can be listed and deleted, in
// their preferred versions.
func (a *Applier) resources() ([]listable, error) {
	lists, err := a.disc.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		if unreachable(err) {
			return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	var out []listable
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, listable{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
		}
	}
	return out, nil
}

// holdsOthers reports why deleting ref would take objects the placement does
// not own with it: a namespace holding other objects, a CRD with other custom
// resources. "" means it may be deleted.
func (a *Applier) holdsOthers(ctx context.Context, ref ownedRef, placementName string) (string, error) {
	switch {
	case ref.key.Group == "" && ref.key.Kind == "Namespace":
		return a.namespaceHoldsOthers(ctx, ref.key.Name, placementName)
	case ref.gvr.GroupResource() == crdGVR.GroupResource():
		return a.crdHoldsOthers(ctx, ref.key.Name, placementName)
	}
	return "", nil
}

// systemObject reports whether an object in a namespace comes and goes with
// the namespace or with other objects, so that it does not keep a namespace.
func systemObject(r listable, m metav1.ObjectMeta) bool {
	if len(m.OwnerReferences) > 0 || m.DeletionTimestamp != nil {
		return true
	}
	switch {
	case r.kind == "Event", r.kind == "Endpoints" && r.gvr.Group == "", r.kind == "EndpointSlice",
		r.kind == "Lease" && r.gvr.Group == "coordination.k8s.io":
		return true
	case r.kind == "ConfigMap" && r.gvr.Group == "" && m.Name == "kube-root-ca.crt":
		return true
	case r.kind == "ServiceAccount" && r.gvr.Group == "" && m.Name == "default":
		return true
	}
	return false
}

func (a *Applier) namespaceHoldsOthers(ctx context.Context, ns, placementName string) (string, error) {
	res, err := a.resources()
	if err != nil {
		return "", err
	}
	var (
		mu     sync.Mutex
		others []string
		errs   []error
	)
	forEach(ctx, 8, res, func(r listable) {
		if !r.namespaced {
			return
		}
		list, err := a.meta.Resource(r.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) && !apierrors.IsForbidden(err) {
				errs = append(errs, fmt.Errorf("list %s in namespace %s: %w", r.gvr, ns, err))
			}
			return
		}
		for _, item := range list.Items {
			if systemObject(r, item.ObjectMeta) || manifest.OwnedBy(item.Labels, placementName) {
				continue
			}
			others = append(others, r.kind+" "+item.Name)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	if len(others) == 0 {
		return "", nil
	}
	slices.Sort(others)
	return fmt.Sprintf("namespace %s holds %d object(s) the placement does not own (%s)", ns, len(others), preview(others)), nil
}

func (a *Applier) crdHoldsOthers(ctx context.Context, name, placementName string) (string, error) {
	crd, err := a.dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read CRD %s: %w", name, err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		if m, ok := v.(map[string]any); ok && m["served"] == true {
			version, _ = m["name"].(string)
			if m["storage"] == true {
				break
			}
		}
	}
	if version == "" {
		return "", nil
	}
	list, err := a.meta.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("list custom resources of %s: %w", name, err)
	}
	var others []string
	for _, item := range list.Items {
		if item.DeletionTimestamp == nil && !manifest.OwnedBy(item.Labels, placementName) {
			others = append(others, strings.TrimPrefix(item.Namespace+"/"+item.Name, "/"))
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	slices.Sort(others)
	return fmt.Sprintf("CRD %s has %d custom resource(s) the placement does not own (%s)", name, len(others), preview(others)), nil
}

func preview(names []string) string {
	const n = 3
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + ", ..."
}
