// Package selection picks a placement's resources from the hub store: by
// group, version and kind with a name or a label selector. A selected
// Namespace brings every object in it (selectionScope NamespaceWithResources,
// the default), nothing more (NamespaceOnly), or what the placement's other
// selectors select in it (NamespaceWithResourceSelectors); other kinds must be
// cluster-scoped and are selected directly, unless the selector is
// namespace-aware (see NamespaceLabel) or a NamespaceWithResourceSelectors
// selector names the namespace to select them in. Envelopes (ConfigMap envelopes, ResourceEnvelope,
// ClusterResourceEnvelope) are selected as themselves: their contents are
// unwrapped on the member, not here.
package selection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	sigsjson "sigs.k8s.io/json"

	"github.com/flotilla-dev/flotilla/events/api"
)

// NamespaceLabel is a label every hub object carries for selection only (it
// is never stored or placed): its value is the object's namespace, empty for
// a cluster-scoped object, much as Kubernetes labels every Namespace with
// kubernetes.io/metadata.name.
//
// A resource selector whose labelSelector names this key is namespace-aware:
// it may select a namespaced kind directly, restricted to the namespaces it
// matches. This is how Flotilla carries KubeAdmiral's PropagationPolicy,
// which places the labelled objects of its own namespace (fleetctl converts
// one into placements whose selectors match NamespaceLabel=<its namespace>;
// a ClusterPropagationPolicy's match it with Exists), much as Fleet's
// namespaced ResourcePlacement selects within its namespace. A selector that
// does not name the key keeps the ClusterResourcePlacement rule: namespaced
// objects are placed through their Namespace.
const NamespaceLabel = api.NamespaceSelectionLabel

// Object is one hub object as selection sees it.
type Object struct {
	// ID is the object's identity (never with an envelope).
	ID       api.ResourceIdentifier
	Labels   map[string]string
	Manifest json.RawMessage
	// skip is why a namespace's contents leave the object out ("" to keep it).
	skip string
}

// Key is the identity of an object as one string, for maps and ordering.
func Key(id api.ResourceIdentifier) string {
	return strings.Join([]string{id.Group, id.Version, id.Kind, id.Namespace, id.Name}, "/")
}

// NewObject reads the identity and labels of a manifest.
func NewObject(manifest json.RawMessage) (Object, error) {
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Type       string `json:"type"` // a Secret's type
		Metadata   struct {
			Name            string                  `json:"name"`
			Namespace       string                  `json:"namespace"`
			Labels          map[string]string       `json:"labels"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	// Field names match exactly, as the hub store and API servers read them
	// (encoding/json would read "NAME" or "nameSpace" as well).
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(manifest, &m); err != nil {
		return Object{}, fmt.Errorf("read manifest: %w", err)
	}
	if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
		return Object{}, errors.New("read manifest: apiVersion, kind and metadata.name are required")
	}
	group, version := "", m.APIVersion
	if i := strings.LastIndex(m.APIVersion, "/"); i >= 0 {
		group, version = m.APIVersion[:i], m.APIVersion[i+1:]
	}
	o := Object{
		ID: api.ResourceIdentifier{Group: group, Version: version, Kind: m.Kind,
			Namespace: m.Metadata.Namespace, Name: m.Metadata.Name},
		Labels:   m.Metadata.Labels,
		Manifest: manifest,
	}
	o.skip = skipReason(o.ID, m.Type, m.Metadata.OwnerReferences)
	return o, nil
}

// skipReason says why an object in a selected namespace is not placed with
// it: objects every namespace gets from its cluster, events, hub-side
// policies, and objects a controller owns (the controller's own object is
// placed and recreates them).
func skipReason(id api.ResourceIdentifier, secretType string, owners []metav1.OwnerReference) string {
	switch {
	case id.Group == "" && id.Kind == "ConfigMap" && id.Name == "kube-root-ca.crt":
		return "created by every cluster in every namespace"
	case id.Group == "" && id.Kind == "ServiceAccount" && id.Name == "default":
		return "created by every cluster in every namespace"
	case id.Group == "" && id.Kind == "Secret" && secretType == "kubernetes.io/service-account-token":
		return "a service account token is issued by each cluster"
	case id.Kind == "Event" && (id.Group == "" || id.Group == "events.k8s.io"):
		return "events are not placed"
	case id.Group == "core.kubeadmiral.io" && (id.Kind == "PropagationPolicy" || id.Kind == "ClusterPropagationPolicy"):
		return "a propagation policy steers placement on the hub"
	}
	for _, o := range owners {
		if o.Controller != nil && *o.Controller {
			return fmt.Sprintf("controlled by %s %s", o.Kind, o.Name)
		}
	}
	return ""
}

// Store gives selection the hub objects it asks for.
type Store interface {
	// ByKind returns the objects of group/version/kind, only the one named
	// name when it is not empty.
	ByKind(ctx context.Context, group, version, kind, name string) ([]Object, error)
	// InNamespace returns every object in namespace.
	InNamespace(ctx context.Context, namespace string) ([]Object, error)
}

// InvalidError reports resource selectors that cannot select anything as
// written: the placement's InvalidResourceSelectors.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string {
	return "invalid resource selectors: " + strings.Join(e.Problems, "; ")
}

// Select returns the objects the selectors pick, each once, ordered by Key.
// Selectors that cannot work (a namespaced kind selected directly, a label
// selector that does not parse) give an *InvalidError listing every problem;
// store failures are returned as they are.
//
// namespace is a ResourcePlacement's namespace, "" for a
// ClusterResourcePlacement: a ResourcePlacement's selectors select namespaced
// objects of its namespace only, and a cluster-scoped kind is a problem.
func Select(ctx context.Context, namespace string, selectors []api.ClusterResourceSelector, store Store) ([]Object, error) {
	out, _, err := SelectEach(ctx, namespace, selectors, store)
	return out, err
}

// SelectEach is Select, and also says which selectors (by index) picked
// nothing: a placement whose every selector already picks something can have
// its first snapshot cut without waiting for more of its objects to arrive.
func SelectEach(ctx context.Context, namespace string, selectors []api.ClusterResourceSelector, store Store) (objects []Object, unmatched []int, err error) {
	picked := map[string]Object{}
	var problems []string
	within := withinNamespace(selectors)
	for i, s := range selectors {
		var (
			objs    []Object
			problem string
			err     error
		)
		if namespace != "" {
			objs, problem, err = selectInPlacementNamespace(ctx, s, namespace, store)
		} else {
			objs, problem, err = selectOne(ctx, s, within, store)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("resource selector %d: %w", i, err)
		}
		if problem != "" {
			problems = append(problems, fmt.Sprintf("resourceSelectors[%d] (%s): %s", i, describe(s), problem))
			continue
		}
		if len(objs) == 0 {
			unmatched = append(unmatched, i)
		}
		for _, o := range objs {
			picked[Key(o.ID)] = o
		}
	}
	if len(problems) > 0 {
		return nil, nil, &InvalidError{Problems: problems}
	}
	out := make([]Object, 0, len(picked))
	for _, o := range picked {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Object) int { return cmp.Compare(Key(a.ID), Key(b.ID)) })
	return out, unmatched, nil
}

// withinNamespace is the namespace a NamespaceWithResourceSelectors selector
// names: the other selectors select namespaced objects within it. "" when
// there is none.
func withinNamespace(selectors []api.ClusterResourceSelector) string {
	for _, s := range selectors {
		if s.IsNamespace() && s.SelectionScope == api.NamespaceWithResourceSelectors {
			return s.Name
		}
	}
	return ""
}

// selectOne applies one selector. within is the namespace of a
// NamespaceWithResourceSelectors selector, in which a selector of a
// namespaced kind selects ("" for none: such a selector is a problem).
func selectOne(ctx context.Context, s api.ClusterResourceSelector, within string, store Store) ([]Object, string, error) {
	if s.Name != "" && s.LabelSelector != nil {
		return nil, "set either name or labelSelector, not both", nil
	}
	if within != "" && !s.IsNamespace() {
		if scope, known := KnownScope(s.Group, s.Kind); !known || scope == Namespaced {
			return selectWithin(ctx, s, within, store)
		}
	}
	match := labels.Everything()
	if s.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return nil, fmt.Sprintf("labelSelector: %v", err), nil
		}
		match = sel
	}
	namespaceAware := namesNamespaceLabel(s.LabelSelector)
	if scope, known := KnownScope(s.Group, s.Kind); known && scope == Namespaced && !namespaceAware {
		return nil, namespacedProblem(s), nil
	}
	candidates, err := store.ByKind(ctx, s.Group, s.Version, s.Kind, s.Name)
	if err != nil {
		return nil, "", err
	}
	var out []Object
	for _, o := range candidates {
		if o.ID.Namespace != "" {
			if !namespaceAware {
				// Not a kind this package knows, but the hub holds it in a
				// namespace: it is namespaced.
				return nil, namespacedProblem(s), nil
			}
			if o.skip != "" {
				continue // left out as a namespace's contents leave it out
			}
		}
		set := labels.Set(o.Labels)
		if namespaceAware {
			set = selectionLabels(o)
		}
		if !match.Matches(set) {
			continue
		}
		out = append(out, o)
	}
	if s.IsNamespace() && s.EffectiveSelectionScope() == api.NamespaceWithResources {
		var contents []Object
		for _, ns := range out {
			objs, err := store.InNamespace(ctx, ns.ID.Name)
			if err != nil {
				return nil, "", err
			}
			for _, o := range objs {
				if o.skip == "" {
					contents = append(contents, o)
				}
			}
		}
		out = append(out, contents...)
	}
	return out, "", nil
}

// selectWithin selects, for a NamespaceWithResourceSelectors placement, the
// objects of a selector's kind in the namespace (those the namespace's
// contents would leave out are left out), and those of a cluster-scoped kind
// the store knows no scope of, as usual.
func selectWithin(ctx context.Context, s api.ClusterResourceSelector, namespace string, store Store) ([]Object, string, error) {
	match := labels.Everything()
	if s.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return nil, fmt.Sprintf("labelSelector: %v", err), nil
		}
		match = sel
	}
	candidates, err := store.ByKind(ctx, s.Group, s.Version, s.Kind, s.Name)
	if err != nil {
		return nil, "", err
	}
	var out []Object
	for _, o := range candidates {
		if o.ID.Namespace != "" && (o.ID.Namespace != namespace || o.skip != "") {
			continue
		}
		if match.Matches(labels.Set(o.Labels)) {
			out = append(out, o)
		}
	}
	return out, "", nil
}

// selectInPlacementNamespace applies one selector of a ResourcePlacement: the
// objects of its kind in the placement's namespace.
func selectInPlacementNamespace(ctx context.Context, s api.ClusterResourceSelector, namespace string, store Store) ([]Object, string, error) {
	if s.Name != "" && s.LabelSelector != nil {
		return nil, "set either name or labelSelector, not both", nil
	}
	if scope, known := KnownScope(s.Group, s.Kind); known && scope == ClusterScoped {
		return nil, fmt.Sprintf("%s is a cluster-scoped kind; a ResourcePlacement selects namespaced resources of its namespace %q: select it with a ClusterResourcePlacement", s.Kind, namespace), nil
	}
	objs, problem, err := selectWithin(ctx, s, namespace, store)
	if problem != "" || err != nil {
		return nil, problem, err
	}
	out := objs[:0]
	for _, o := range objs {
		if o.ID.Namespace == namespace { // selectWithin keeps cluster-scoped objects
			out = append(out, o)
		}
	}
	return out, "", nil
}

// namesNamespaceLabel reports whether a label selector is namespace-aware:
// it names NamespaceLabel in matchLabels or matchExpressions.
func namesNamespaceLabel(sel *metav1.LabelSelector) bool {
	if sel == nil {
		return false
	}
	if _, ok := sel.MatchLabels[NamespaceLabel]; ok {
		return true
	}
	for _, r := range sel.MatchExpressions {
		if r.Key == NamespaceLabel {
			return true
		}
	}
	return false
}

// selectionLabels are an object's labels with NamespaceLabel set to its
// namespace, for a namespace-aware selector (no other selector can tell the
// difference, so they match the labels as they are).
func selectionLabels(o Object) labels.Set {
	set := make(labels.Set, len(o.Labels)+1)
	for k, v := range o.Labels {
		set[k] = v
	}
	set[NamespaceLabel] = o.ID.Namespace
	return set
}

func namespacedProblem(s api.ClusterResourceSelector) string {
	return fmt.Sprintf("%s is a namespaced kind; a ClusterResourcePlacement selects cluster-scoped resources: select its Namespace to place the objects in it",
		s.Kind)
}

func describe(s api.ClusterResourceSelector) string {
	gv := s.Version
	if s.Group != "" {
		gv = s.Group + "/" + s.Version
	}
	switch {
	case s.Name != "":
		return fmt.Sprintf("%s %s %s", gv, s.Kind, s.Name)
	case s.LabelSelector != nil:
		if f := metav1.FormatLabelSelector(s.LabelSelector); f != "<error>" {
			return fmt.Sprintf("%s %s with labels %s", gv, s.Kind, f)
		}
		return fmt.Sprintf("%s %s with a labelSelector", gv, s.Kind)
	default:
		return fmt.Sprintf("%s %s", gv, s.Kind)
	}
}

// Objects is an in-memory Store, for tests and small tools.
type Objects []Object

// ByKind implements Store.
func (s Objects) ByKind(_ context.Context, group, version, kind, name string) ([]Object, error) {
	var out []Object
	for _, o := range s {
		if o.ID.Group == group && o.ID.Version == version && o.ID.Kind == kind && (name == "" || o.ID.Name == name) {
			out = append(out, o)
		}
	}
	return out, nil
}

// InNamespace implements Store.
func (s Objects) InNamespace(_ context.Context, namespace string) ([]Object, error) {
	var out []Object
	for _, o := range s {
		if o.ID.Namespace == namespace {
			out = append(out, o)
		}
	}
	return out, nil
}

// MayConcern reports whether a change to the hub object id could change
// what selectors select: a selector of its kind (by its name, or by labels,
// which the change may have added or removed), or a Namespace selector that
// may select its namespace. It errs towards true; false means the placement
// need not be re-selected.
func MayConcern(selectors []api.ClusterResourceSelector, id api.ResourceIdentifier) bool {
	for _, s := range selectors {
		if s.Group == id.Group && s.Kind == id.Kind && (s.Name == "" || s.Name == id.Name) {
			return true
		}
		if id.Namespace != "" && s.Group == "" && s.Kind == "Namespace" && (s.Name == "" || s.Name == id.Namespace) {
			return true
		}
	}
	return false
}
