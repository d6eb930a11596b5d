package hubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
)

// Snapshot is the hub as the informers see it: every object of every kind watched and
// synced, and which kinds those are.
type Snapshot struct {
	Objects []*unstructured.Unstructured
	// Known are the kinds whose objects are all in Objects: a kind not known (not
	// discovered yet, or its watch not synced) is neither published nor deleted.
	Known map[schema.GroupKind]bool
	// SystemNamespace is hubsync's own namespace on the hub (its lease and certificate):
	// never published, as kube-system and the other kube- namespaces are not.
	SystemNamespace string
}

// Class orders what a pass publishes: members join before anything is placed on them,
// hub objects are in the hub store before the placements that select them, overrides
// before the placements they change (a new placement rolls out overridden at once), and
// staged update strategies and runs, then evictions and budgets, after the placements they
// name; in reverse for deletions (a
// placement goes before its objects leave the hub store, so that its delete strategy, not
// an emptied selection, decides what happens on the members).
type Class int

// The values are kept in records: new classes go at the end, and Rank orders them.
const (
	ClassMember Class = iota
	ClassHubResource
	ClassPlacement
	ClassOverride
	ClassDisruption
	ClassStagedUpdate
)

// Rank is the class's place in the order of upserts.
func (c Class) Rank() int {
	switch c {
	case ClassOverride:
		return int(ClassPlacement)
	case ClassPlacement:
		return int(ClassPlacement) + 1
	case ClassStagedUpdate:
		return int(ClassPlacement) + 2
	case ClassDisruption:
		return int(ClassPlacement) + 3
	}
	return int(c)
}

// Record is what hubsync keeps per event subject it published on: the hub object it came
// from, the content it last published, and the change that undoes it.
type Record struct {
	Subject string `json:"subject"`
	// Source names the hub object: group/Kind/namespace/name.
	Source string `json:"source"`
	Class  Class  `json:"class"`
	// Hash is the SHA-256 of the type and payload last published.
	Hash string `json:"hash"`
	Undo Undo   `json:"undo"`
}

// Undo is the change that takes a record's object off the bus: a placement deleted, a
// member leaving, a hub object leaving the hub store.
type Undo struct {
	Type         string          `json:"type"`
	Subject      string          `json:"subject"`
	EventSubject string          `json:"eventSubject"`
	Payload      json.RawMessage `json:"payload"`
}

// Change is Undo as a change to publish.
func (u Undo) Change() change.Change {
	return change.Change{Type: u.Type, Subject: u.Subject, EventSubject: u.EventSubject, Payload: u.Payload}
}

// Want is one change the hub asks for, with the record it leaves.
type Want struct {
	Change change.Change
	Record Record
}

// Problem is a hub object hubsync cannot publish, at a field path when it has one.
type Problem struct {
	Source string
	Detail string
}

// Desired is what the hub asks for.
type Desired struct {
	// Wants by event subject.
	Wants map[string]Want
	// Present are the sources of every object on the hub of a known kind, published or not:
	// a record whose object is present but no longer wanted (a placement that became
	// invalid, an object no placement selects any more) is left as it is.
	Present map[string]bool
	Known   map[schema.GroupKind]bool
	// Problems are the objects that could not be published.
	Problems []Problem
}

// SourceOf names a hub object in records: group/Kind/namespace/name.
func SourceOf(gk schema.GroupKind, namespace, name string) string {
	return strings.Join([]string{gk.Group, gk.Kind, namespace, name}, "/")
}

// sourceGroupKind is the kind a source names.
func sourceGroupKind(source string) schema.GroupKind {
	parts := strings.SplitN(source, "/", 3)
	if len(parts) < 2 {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: parts[0], Kind: parts[1]}
}

// Compute turns a snapshot of the hub into what should be on the bus: every valid
// placement, member cluster, propagation policy, override, eviction, disruption
// budget, staged update strategy and run, and the hub objects the placements
// select, as fleetctl apply would publish them.
func Compute(ctx context.Context, snap Snapshot, cache *Conversions) (*Desired, error) {
	d := &Desired{Wants: map[string]Want{}, Present: map[string]bool{}, Known: snap.Known}
	var placements []*api.ClusterResourcePlacement
	var resources []converted
	for _, u := range snap.Objects {
		gvk := u.GroupVersionKind()
		source := SourceOf(gvk.GroupKind(), u.GetNamespace(), u.GetName())
		d.Present[source] = true
		if excludedNamespace(u, snap.SystemNamespace) {
			continue
		}
		c := cache.convert(u)
		if c.problem != "" {
			d.Problems = append(d.Problems, Problem{Source: source, Detail: c.problem})
			continue
		}
		switch gvk {
		case crds.Placement.GVK, crds.ResourcePlacement.GVK, crds.Member.GVK, crds.PropagationPolicy.GVK, crds.ClusterPropagationPolicy.GVK,
			crds.ClusterOverride.GVK, crds.Override.GVK, crds.Eviction.GVK, crds.DisruptionBudget.GVK,
			crds.StagedUpdateStrategy.GVK, crds.StagedUpdateRun.GVK:
			for _, w := range c.wants {
				d.Wants[w.Record.Subject] = w
			}
			placements = append(placements, c.placements...)
		default:
			resources = append(resources, c)
		}
	}
	selected, err := selectResources(ctx, placements, resources)
	if err != nil {
		return nil, err
	}
	for _, c := range selected {
		for _, w := range c.wants {
			d.Wants[w.Record.Subject] = w
		}
	}
	return d, nil
}

// excludedNamespace keeps the hub's own system namespaces and what is in them off the bus.
func excludedNamespace(u *unstructured.Unstructured, system string) bool {
	ns := u.GetNamespace()
	if u.GetAPIVersion() == "v1" && u.GetKind() == "Namespace" {
		ns = u.GetName()
	}
	return ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease" || (ns != "" && ns == system)
}

// converted is one hub object as fleetctl apply would publish it.
type converted struct {
	wants []Want
	// placements are the placements it stands for (a CRP, or a policy's two).
	placements []*api.ClusterResourcePlacement
	// object is a hub resource as selection sees it (as published).
	object  selection.Object
	problem string
}

// Conversions converts hub objects, remembering each by its resource version so that a pass
// converts only what changed since the last.
type Conversions struct {
	byVersion map[string]cached
	// seen marks the entries the current pass used; the others are dropped after it.
	seen map[string]bool
}

type cached struct {
	version string
	c       converted
}

// NewConversions is an empty cache.
func NewConversions() *Conversions {
	return &Conversions{byVersion: map[string]cached{}, seen: map[string]bool{}}
}

// sweep forgets the objects the last pass did not see.
func (cs *Conversions) sweep() {
	for k := range cs.byVersion {
		if !cs.seen[k] {
			delete(cs.byVersion, k)
		}
	}
	cs.seen = map[string]bool{}
}

func (cs *Conversions) convert(u *unstructured.Unstructured) converted {
	key := SourceOf(u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()) + "@" + u.GetAPIVersion()
	cs.seen[key] = true
	if c, ok := cs.byVersion[key]; ok && c.version == u.GetResourceVersion() && u.GetResourceVersion() != "" {
		return c.c
	}
	c := convert(u)
	cs.byVersion[key] = cached{version: u.GetResourceVersion(), c: c}
	return c
}

// convert decodes, defaults and validates a Fleet object as fleetctl apply does, and turns
// any object into the changes fleetctl apply would publish for it.
func convert(u *unstructured.Unstructured) converted {
	u = u.DeepCopy()
	gvk := u.GroupVersionKind()
	source := SourceOf(gvk.GroupKind(), u.GetNamespace(), u.GetName())
	doc := input.Document{Source: source, Document: api.Document{Item: -1, Object: u}}
	var placements []*api.ClusterResourcePlacement
	isPolicy := gvk == crds.PropagationPolicy.GVK || gvk == crds.ClusterPropagationPolicy.GVK
	if _, fleet := crds.ByGVK(gvk); fleet && gvk != crds.ClusterEnvelope.GVK && gvk != crds.Envelope.GVK {
		obj, err := decodeFleetObject(u)
		if err != nil {
			return converted{problem: err.Error()}
		}
		api.Default(obj)
		if errs := api.Validate(obj); len(errs) > 0 {
			return converted{problem: strings.Join(errs.Fields(), "; ")}
		}
		doc.Object = obj
		if crp, ok := obj.(*api.ClusterResourcePlacement); ok {
			placements = append(placements, crp)
		}
	}
	items, problems := change.ForApply([]input.Document{doc}, change.Options{NamespaceAsGiven: true})
	if len(problems) > 0 {
		var details []string
		for _, p := range problems {
			details = append(details, strings.TrimPrefix(p.Field+": "+p.Detail, ": "))
		}
		return converted{problem: strings.Join(details, "; ")}
	}
	c := converted{placements: placements}
	for _, it := range items {
		for _, ch := range it.Changes {
			w, err := want(ch, source)
			if err != nil {
				return converted{problem: err.Error()}
			}
			c.wants = append(c.wants, w)
			if p, ok := ch.Payload.(events.PlacementUpserted); ok && isPolicy {
				placements = append(placements, &p.Placement) // a policy's placements
			}
			if h, ok := ch.Payload.(events.HubResourceUpserted); ok {
				if c.object, err = selection.NewObject(h.Manifest); err != nil {
					return converted{problem: err.Error()}
				}
			}
		}
	}
	c.placements = placements
	return c
}

// decodeFleetObject reads a Fleet object from the hub with the decoder fleetctl uses (enum
// values read case-insensitively, as the seeds write them), leaving out what the API server
// and hubsync added: status and the server's metadata.
func decodeFleetObject(u *unstructured.Unstructured) (api.Object, error) {
	api.StripServerFields(u)
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	obj, err := api.Decode(data)
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// want is the change with its record: the undo each kind of change has.
func want(c change.Change, source string) (Want, error) {
	payload, err := json.Marshal(c.Payload)
	if err != nil {
		return Want{}, fmt.Errorf("encode %s: %w", c.Type, err)
	}
	sum := sha256.Sum256(append([]byte(c.Type+"\x00"), payload...))
	r := Record{Subject: c.Subject, Source: source, Hash: hex.EncodeToString(sum[:])}
	var undo change.Change
	switch p := c.Payload.(type) {
	case events.PlacementUpserted:
		r.Class = ClassPlacement
		undo, err = change.PlacementDeleted(p.Placement.Name)
	case events.MemberJoined:
		r.Class = ClassMember
		undo, err = change.MemberLeft(p.Member.Name, "")
	case events.HubResourceUpserted:
		r.Class = ClassHubResource
		var id selection.Object
		if id, err = selection.NewObject(p.Manifest); err == nil {
			undo, err = change.HubResourceDeleted(id.ID)
		}
	case events.OverrideUpserted:
		r.Class = ClassOverride
		undo, err = change.OverrideDeleted(p.Key())
	case events.DisruptionUpserted:
		r.Class = ClassDisruption
		undo, err = change.DisruptionDeleted(p.Key())
	case events.StagedUpdateUpserted:
		r.Class = ClassStagedUpdate
		undo, err = change.StagedUpdateDeleted(p.Key())
	default:
		return Want{}, fmt.Errorf("hubsync does not publish %s", c.Type)
	}
	if err != nil {
		return Want{}, err
	}
	undoPayload, err := json.Marshal(undo.Payload)
	if err != nil {
		return Want{}, fmt.Errorf("encode %s: %w", undo.Type, err)
	}
	r.Undo = Undo{Type: undo.Type, Subject: undo.Subject, EventSubject: undo.EventSubject, Payload: undoPayload}
	return Want{Change: c, Record: r}, nil
}
