// Package change turns the objects of fleetctl apply and delete into the
// events that carry them out: which event, on which subject, with which
// payload. It does no I/O.
package change

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
	"github.com/flotilla-dev/flotilla/services/fleetctl/kubeadmiral"
)

// Change is one event to publish.
type Change struct {
	// Type is the event type, e.g. events.TypePlacementUpserted.
	Type string
	// Subject is the NATS subject, e.g. flotilla.placement.web.
	Subject string
	// EventSubject is the CloudEvent subject: the object's name, with its
	// kind and namespace for hub objects.
	EventSubject string
	Payload      any
}

// Item is what one input object turns into: usually one change, two for a
// KubeAdmiral policy.
type Item struct {
	// Where names the input document: "web.yaml: document 2".
	Where string
	// Object names the input object as kubectl does:
	// clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp.
	Object string
	// Note follows the outcome in fleetctl's output, e.g. the placements a
	// policy became.
	Note    string
	Changes []Change
	// Warnings are printed before publishing.
	Warnings []string

	phase phase
}

// phase orders what one apply publishes: everything a placement's first snapshot
// reads, then placements, then what refers to a placement.
type phase int

const (
	// phaseHub: hub objects, envelopes, overrides, members, strategies, budgets.
	phaseHub phase = iota
	// phasePlacement: ClusterResourcePlacements, ResourcePlacements, KubeAdmiral policies.
	phasePlacement
	// phaseRun: staged update runs, approvals and evictions, which name a placement.
	phaseRun
)

// Options tune the conversion.
type Options struct {
	// Namespace is given to namespaced hub objects that have none, as
	// kubectl gives its context's namespace. Empty means "default".
	Namespace string
	// NamespaceAsGiven: the objects come from an API server (hubsync reads them from a hub
	// cluster), so an object has a namespace exactly when its kind is namespaced, and none
	// is filled in, whatever ClusterScoped guesses of a kind it does not know.
	NamespaceAsGiven bool
}

func (o Options) namespace() string {
	if o.Namespace == "" {
		return "default"
	}
	return o.Namespace
}

// ObjectName names an object as kubectl does: <kind>.<group>/<name>, the
// kind lower-cased and the group left out for the core group.
func ObjectName(gvk schema.GroupVersionKind, name string) string {
	r := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		r += "." + gvk.Group
	}
	return r + "/" + name
}

// ForApply returns what applying docs publishes, or the problems that prevent
// it. docs must have passed input.Load.
//
// The items come in dependency order, in input order within each step: hub
// objects and overrides (everything a placement's snapshot reads), then
// placements, then staged update runs, approvals and evictions. The rollout cuts
// a new placement's first snapshot as soon as every selector picks something, so
// a file that lists its overrides after its placement would otherwise roll the
// placement out once without them.
func ForApply(docs []input.Document, opts Options) ([]Item, []input.Problem) {
	var items []Item
	var problems []input.Problem
	policies := policiesIn(docs)
	for _, d := range docs {
		item, errs := applyItem(d, opts, policies)
		item.Where = d.Where()
		if len(errs) > 0 {
			problems = append(problems, input.ProblemsAt(d, errs)...)
			continue
		}
		items = append(items, item)
	}
	slices.SortStableFunc(items, func(a, b Item) int { return int(a.phase) - int(b.phase) })
	return items, problems
}

func applyItem(d input.Document, opts Options, policies policySet) (Item, api.ErrorList) {
	gvk := d.Object.GetObjectKind().GroupVersionKind()
	item := Item{Object: ObjectName(gvk, d.Object.GetName()), phase: phaseHub}
	switch o := d.Object.(type) {
	case *api.ClusterResourcePlacement:
		c, err := placementUpserted(o)
		if err != nil {
			return item, fieldError("", err)
		}
		item.Changes, item.phase = []Change{c}, phasePlacement
	case *api.MemberCluster:
		m := *o
		m.Status = api.MemberClusterStatus{}
		m.ObjectMeta = userMetadata(m.ObjectMeta)
		subject, err := events.MemberSubject(m.Name)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		// Joined is an upsert: the scheduler takes a second Joined as an update.
		item.Changes = []Change{{Type: events.TypeMemberJoined, Subject: subject, EventSubject: m.Name,
			Payload: events.MemberJoined{Member: m}}}
	case *api.PropagationPolicy, *api.ClusterPropagationPolicy:
		p, _ := kubeadmiral.PolicyOf(o)
		conv, errs := kubeadmiral.Convert(p)
		item.Warnings = conv.Warnings
		if len(errs) > 0 {
			return item, errs
		}
		var names []string
		for _, crp := range conv.Placements() {
			c, err := placementUpserted(crp)
			if err != nil {
				return item, fieldError("metadata.name", err)
			}
			item.Changes = append(item.Changes, c)
			names = append(names, crp.Name)
		}
		item.Note = "as clusterresourceplacements " + strings.Join(names, " and ")
		item.phase = phasePlacement
	case *api.ClusterResourceOverride, *api.ResourceOverride:
		c, err := OverrideUpserted(o)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.ClusterStagedUpdateStrategy, *api.ClusterStagedUpdateRun:
		c, err := StagedUpdateUpserted(o)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
		if _, run := o.(*api.ClusterStagedUpdateRun); run {
			item.phase = phaseRun
		}
	case *api.ClusterResourcePlacementEviction, *api.ClusterResourcePlacementDisruptionBudget:
		c, err := DisruptionUpserted(o)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
		if _, eviction := o.(*api.ClusterResourcePlacementEviction); eviction {
			item.phase = phaseRun
		}
	case *api.ClusterApprovalRequest:
		// Runs create their approval requests; a user applies one only to
		// approve it, as with kubectl, by setting the condition Approved.
		if !approved(o.Status.Conditions) {
			return item, api.ErrorList{{Type: api.ErrorTypeForbidden, Field: "status.conditions",
				Detail: "a ClusterApprovalRequest is created by its run; applying one only approves it, and this one has no condition Approved with status True (use fleetctl approve clusterapprovalrequest " + o.Name + ")"}}
		}
		c, err := ApprovalRequestApproved(api.InternalStaged(o).GetName(), "")
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes, item.phase = []Change{c}, phaseRun
	case *api.ClusterResourceEnvelope, *api.ResourceEnvelope:
		data, err := json.Marshal(o)
		if err != nil {
			return item, fieldError("", err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return item, fieldError("", err)
		}
		// The typed object writes an empty creationTimestamp as null; that
		// is not a server field the user copied.
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp"); found && v == nil {
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		}
		return hubItem(item, u, opts)
	case *unstructured.Unstructured:
		item.Warnings = policies.unselected(o)
		return hubItem(item, o.DeepCopy(), opts)
	default:
		return item, api.ErrorList{{Type: api.ErrorTypeNotSupported, Field: "kind", Detail: fmt.Sprintf("fleetctl cannot apply %T", o)}}
	}
	return item, nil
}

func placementUpserted(crp *api.ClusterResourcePlacement) (Change, error) {
	p := *api.InternalPlacement(crp) // a ResourcePlacement travels under its key
	// Status is the status service's to report, and server fields are the
	// hub's to set: an object saved with fleetctl get -o yaml applies as is.
	p.Status = api.PlacementStatus{}
	p.ObjectMeta = userMetadata(p.ObjectMeta)
	subject, err := events.PlacementSubject(p.Name)
	if err != nil {
		return Change{}, err
	}
	return Change{Type: events.TypePlacementUpserted, Subject: subject, EventSubject: p.Name,
		Payload: events.PlacementUpserted{Placement: p}}, nil
}

// OverrideUpserted publishes a ClusterResourceOverride or a ResourceOverride
// as the user wrote it (in its version), without status or server metadata.
func OverrideUpserted(obj api.Object) (Change, error) {
	var payload events.OverrideUpserted
	switch o := obj.(type) {
	case *api.ClusterResourceOverride:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		payload.ClusterResourceOverride = &c
	case *api.ResourceOverride:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		payload.ResourceOverride = &c
	default:
		return Change{}, fmt.Errorf("%T is not an override", obj)
	}
	return overrideChange(events.TypeOverrideUpserted, payload.Key(), payload)
}

// OverrideDeleted deletes the override k.
func OverrideDeleted(k api.OverrideKey) (Change, error) {
	return overrideChange(events.TypeOverrideDeleted, k, events.OverrideDeleted{Override: k})
}

func overrideChange(typ string, k api.OverrideKey, payload any) (Change, error) {
	subject, err := events.OverrideSubject(k)
	if err != nil {
		return Change{}, err
	}
	eventSubject := k.Kind + "/" + k.Name
	if k.Namespace != "" {
		eventSubject = k.Kind + "/" + k.Namespace + "/" + k.Name
	}
	return Change{Type: typ, Subject: subject, EventSubject: eventSubject, Payload: payload}, nil
}

// StagedUpdateUpserted publishes a ClusterStagedUpdateStrategy or a
// ClusterStagedUpdateRun without status or server metadata: a run's status is
// the rollout's.
func StagedUpdateUpserted(obj api.Object) (Change, error) {
	var payload events.StagedUpdateUpserted
	switch o := api.InternalStaged(obj).(type) {
	case *api.ClusterStagedUpdateStrategy:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		payload.ClusterStagedUpdateStrategy = &c
	case *api.ClusterStagedUpdateRun:
		c := *o
		c.ObjectMeta = userMetadata(c.ObjectMeta)
		c.Status = api.UpdateRunStatus{}
		payload.ClusterStagedUpdateRun = &c
	default:
		return Change{}, fmt.Errorf("%T is not a staged update strategy or run", obj)
	}
	return stagedChange(events.TypeStagedUpdateUpserted, payload.Key(), payload)
}

// StagedUpdateDeleted deletes a strategy or a run.
func StagedUpdateDeleted(k events.StagedUpdateKey) (Change, error) {
	return stagedChange(events.TypeStagedUpdateDeleted, k, events.StagedUpdateDeleted{Object: k})
}

// ApprovalRequestApproved approves the ClusterApprovalRequest name.
func ApprovalRequestApproved(name, message string) (Change, error) {
	k := events.StagedUpdateKey{Kind: api.ClusterApprovalRequestKind, Name: name}
	return stagedChange(events.TypeApprovalRequestApproved, k, events.ApprovalRequestApproved{Name: name, Message: message})
}

func stagedChange(typ string, k events.StagedUpdateKey, payload any) (Change, error) {
	subject, err := events.StagedUpdateSubject(k)
	if err != nil {
		return Change{}, err
	}
	return Change{Type: typ, Subject: subject, EventSubject: k.String(), Payload: payload}, nil
}

func approved(conditions []metav1.Condition) bool {
	for _, c := range conditions {
		if c.Type == api.ApprovalRequestConditionApproved && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// userMetadata keeps what a user sets in metadata.
func userMetadata(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations}
}

// hubItem publishes a manifest to the hub store: server fields stripped, the
// namespace filled in for namespaced kinds, and KubeAdmiral's adopt
// annotation mirrored into kubeadmiral.AdoptLabel.
func hubItem(item Item, u *unstructured.Unstructured, opts Options) (Item, api.ErrorList) {
	if u.GetName() == "" {
		return item, api.ErrorList{{Type: api.ErrorTypeRequired, Field: "metadata.name",
			Detail: "is required: the hub store keeps objects by name, so generateName alone cannot be applied"}}
	}
	if api.StripServerFields(u) {
		item.Warnings = append(item.Warnings, "server-populated fields (status, uid, resourceVersion, ...) were removed")
	}
	gvk := u.GroupVersionKind()
	if u.GetNamespace() == "" && !ClusterScoped(gvk.GroupKind()) && !opts.NamespaceAsGiven {
		u.SetNamespace(opts.namespace())
	}
	if markAdoption(u) {
		item.Note = "adoptable: labelled " + kubeadmiral.AdoptLabel + "=" + kubeadmiral.AdoptValue
	}
	manifestJSON, err := u.MarshalJSON()
	if err != nil {
		return item, fieldError("", err)
	}
	if len(manifestJSON) > api.MaxObjectBytes {
		return item, api.ErrorList{{Type: api.ErrorTypeInvalid, Field: "",
			Detail: fmt.Sprintf("the object is %.2f MiB; Kubernetes stores objects of at most %.1f MiB (etcd's request limit), so no member could hold it",
				float64(len(manifestJSON))/(1<<20), float64(api.MaxObjectBytes)/(1<<20))}}
	}
	subject, err := events.HubResourceSubject(gvk.Group, gvk.Kind, u.GetNamespace(), u.GetName())
	if err != nil {
		return item, fieldError("metadata.name", err)
	}
	item.Changes = []Change{{Type: events.TypeHubResourceUpserted, Subject: subject, EventSubject: hubEventSubject(gvk, u.GetNamespace(), u.GetName()),
		Payload: events.HubResourceUpserted{Manifest: manifestJSON}}}
	return item, nil
}

// markAdoption sets kubeadmiral.AdoptLabel on an object that uses a
// KubeAdmiral policy and asks to be adopted, so that the policy's adopting
// placement selects it; it removes a stale label otherwise. It reports
// whether the object is adoptable.
func markAdoption(u *unstructured.Unstructured) bool {
	labels := u.GetLabels()
	usesPolicy := labels[api.PropagationPolicyNameLabel] != "" || labels[api.ClusterPropagationPolicyNameLabel] != ""
	adopt := usesPolicy && u.GetAnnotations()[api.ConflictResolutionAnnotation] == api.ConflictResolutionAdopt
	_, has := labels[kubeadmiral.AdoptLabel]
	switch {
	case adopt:
		labels[kubeadmiral.AdoptLabel] = kubeadmiral.AdoptValue
		u.SetLabels(labels)
	case has:
		delete(labels, kubeadmiral.AdoptLabel)
		u.SetLabels(labels)
	}
	return adopt
}

func hubEventSubject(gvk schema.GroupVersionKind, namespace, name string) string {
	s := gvk.Kind + "/"
	if namespace != "" {
		s += namespace + "/"
	}
	return s + name
}

// ForDelete returns what deleting docs publishes: a placement is deleted,
// a member leaves with leave, a policy's placements are deleted, any other
// object leaves the hub store. Only names are needed: docs need not validate.
func ForDelete(docs []input.Document, leave events.LeavePolicy, opts Options) ([]Item, []input.Problem) {
	var items []Item
	var problems []input.Problem
	for _, d := range docs {
		item, errs := deleteItem(d, leave, opts)
		item.Where = d.Where()
		if len(errs) > 0 {
			problems = append(problems, input.ProblemsAt(d, errs)...)
			continue
		}
		items = append(items, item)
	}
	slices.SortStableFunc(items, func(a, b Item) int { return int(a.phase) - int(b.phase) })
	return items, problems
}

func deleteItem(d input.Document, leave events.LeavePolicy, opts Options) (Item, api.ErrorList) {
	gvk := d.Object.GetObjectKind().GroupVersionKind()
	name := d.Object.GetName()
	item := Item{Object: ObjectName(gvk, name)}
	if name == "" {
		return item, api.ErrorList{{Type: api.ErrorTypeRequired, Field: "metadata.name", Detail: "is required to delete an object"}}
	}
	switch o := d.Object.(type) {
	case *api.ClusterResourcePlacement:
		if o.Kind == api.ResourcePlacementKind && o.Namespace == "" {
			o = &api.ClusterResourcePlacement{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opts.namespace()}}
		}
		c, err := PlacementDeleted(api.InternalPlacement(o).Name)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.MemberCluster:
		c, err := MemberLeft(name, leave)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.ClusterResourceOverride:
		c, err := OverrideDeleted(api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: name})
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.ResourceOverride:
		ns := o.Namespace
		if ns == "" {
			ns = opts.namespace()
		}
		c, err := OverrideDeleted(api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: ns, Name: name})
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.ClusterResourcePlacementEviction, *api.ClusterResourcePlacementDisruptionBudget:
		c, err := DisruptionDeleted(events.DisruptionKey{Kind: gvk.Kind, Name: name})
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.ClusterStagedUpdateStrategy, *api.ClusterStagedUpdateRun:
		k := events.StagedUpdateKey{Kind: gvk.Kind, Name: name}
		if cluster := api.ClusterStagedKind(gvk.Kind); cluster != "" {
			// A namespaced StagedUpdateStrategy or StagedUpdateRun: by its key.
			ns := d.Object.GetNamespace()
			if ns == "" {
				ns = opts.namespace()
			}
			k = events.StagedUpdateKey{Kind: cluster, Name: api.PlacementKey(ns, name)}
		}
		c, err := StagedUpdateDeleted(k)
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	case *api.PropagationPolicy, *api.ClusterPropagationPolicy:
		p, _ := kubeadmiral.PolicyOf(o)
		keep, adopt := p.PlacementNames()
		for _, n := range []string{keep, adopt} {
			c, err := PlacementDeleted(n)
			if err != nil {
				return item, fieldError("metadata.name", err)
			}
			item.Changes = append(item.Changes, c)
		}
		item.Note = "clusterresourceplacements " + keep + " and " + adopt
	default:
		ns := d.Object.GetNamespace()
		if ns == "" && !ClusterScoped(gvk.GroupKind()) {
			ns = opts.namespace()
		}
		c, err := HubResourceDeleted(api.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: ns, Name: name})
		if err != nil {
			return item, fieldError("metadata.name", err)
		}
		item.Changes = []Change{c}
	}
	return item, nil
}

// PlacementDeleted deletes the placement name.
func PlacementDeleted(name string) (Change, error) {
	subject, err := events.PlacementSubject(name)
	if err != nil {
		return Change{}, err
	}
	return Change{Type: events.TypePlacementDeleted, Subject: subject, EventSubject: name,
		Payload: events.PlacementDeleted{Name: name}}, nil
}

// MemberLeft removes the member name from the fleet.
func MemberLeft(name string, leave events.LeavePolicy) (Change, error) {
	subject, err := events.MemberSubject(name)
	if err != nil {
		return Change{}, err
	}
	return Change{Type: events.TypeMemberLeft, Subject: subject, EventSubject: name,
		Payload: events.MemberLeft{Name: name, LeavePolicy: leave}}, nil
}

// HubResourceDeleted removes an object from the hub store.
func HubResourceDeleted(id api.ResourceIdentifier) (Change, error) {
	subject, err := events.HubResourceSubject(id.Group, id.Kind, id.Namespace, id.Name)
	if err != nil {
		return Change{}, err
	}
	gvk := schema.GroupVersionKind{Group: id.Group, Version: id.Version, Kind: id.Kind}
	return Change{Type: events.TypeHubResourceDeleted, Subject: subject, EventSubject: hubEventSubject(gvk, id.Namespace, id.Name),
		Payload: events.HubResourceDeleted{Resource: id}}, nil
}

func fieldError(field string, err error) api.ErrorList {
	return api.ErrorList{{Type: api.ErrorTypeInvalid, Field: field, Detail: err.Error()}}
}

// policySet holds the KubeAdmiral policies of one apply, by label key and name.
type policySet map[string]kubeadmiral.Policy

func policiesIn(docs []input.Document) policySet {
	set := policySet{}
	for _, d := range docs {
		if p, ok := kubeadmiral.PolicyOf(d.Object); ok {
			set[p.LabelKey()+"="+p.Name] = p
		}
	}
	return set
}

// unselected warns about a hub object labelled for a KubeAdmiral policy whose
// kind the policy does not select: it would silently stay on the hub. A
// policy applied separately is judged by the default kinds.
func (set policySet) unselected(u *unstructured.Unstructured) []string {
	var warnings []string
	for _, key := range []string{api.PropagationPolicyNameLabel, api.ClusterPropagationPolicyNameLabel} {
		name := u.GetLabels()[key]
		if name == "" {
			continue
		}
		p, ok := set[key+"="+name]
		if !ok {
			p = kubeadmiral.Policy{Kind: api.PropagationPolicyKind, Name: name}
			if key == api.ClusterPropagationPolicyNameLabel {
				p.Kind = api.ClusterPropagationPolicyKind
			}
		}
		kinds, _ := p.Kinds()
		gvk := u.GroupVersionKind()
		if !slices.Contains(kinds, gvk) {
			warnings = append(warnings, fmt.Sprintf("%s %s does not select %s objects, so this one stays on the hub; add %s to the policy's %s annotation",
				p.Kind, name, gvk.Kind, gvk.GroupVersion().String()+"/"+gvk.Kind, kubeadmiral.KindsAnnotation))
		}
	}
	return warnings
}
