package events

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Payload rules. They check what a consumer needs to act on an event; the
// Fleet API rules of a placement or member are api.Validate's.

func required(field, value string) error {
	if value == "" {
		return fmt.Errorf("%s: required", field)
	}
	return nil
}

func validatePlacementUpserted(p any) error {
	crp := clone(&p.(*PlacementUpserted).Placement)
	api.SetDefaults(crp)
	return prefixed("placement", api.ValidatePlacement(crp).ToError())
}

func validatePlacementDeleted(p any) error {
	return required("name", p.(*PlacementDeleted).Name)
}

func validateMemberJoined(p any) error {
	return validateMember(&p.(*MemberJoined).Member)
}

func validateMemberUpdated(p any) error {
	return validateMember(&p.(*MemberUpdated).Member)
}

func validateMember(m *api.MemberCluster) error {
	mc := clone(m)
	api.Default(mc)
	return prefixed("member", api.ValidateMemberCluster(mc).ToError())
}

// clone deep-copies an API object, so that defaulting for validation leaves
// the payload as its producer wrote it.
func clone[T any](v *T) *T {
	var out T
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		panic(fmt.Sprintf("clone %T: %v", v, err)) // cannot happen: v was decoded from JSON
	}
	return &out
}

// prefixed puts the payload field in front of an object's field errors.
func prefixed(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", field, err)
}

func validateOverrideUpserted(p any) error {
	v := p.(*OverrideUpserted)
	if (v.ClusterResourceOverride == nil) == (v.ResourceOverride == nil) {
		return errors.New("exactly one of clusterResourceOverride and resourceOverride must be set")
	}
	switch {
	case v.ClusterResourceOverride != nil:
		return prefixed("clusterResourceOverride", api.Validate(clone(v.ClusterResourceOverride)).ToError())
	default:
		return prefixed("resourceOverride", api.Validate(clone(v.ResourceOverride)).ToError())
	}
}

func validateOverrideDeleted(p any) error {
	k := p.(*OverrideDeleted).Override
	switch k.Kind {
	case api.ClusterResourceOverrideKind:
		if k.Namespace != "" {
			return errors.New("override.namespace: must be empty for a ClusterResourceOverride")
		}
	case api.ResourceOverrideKind:
		if err := required("override.namespace", k.Namespace); err != nil {
			return err
		}
	default:
		return fmt.Errorf("override.kind: %q is not %s or %s", k.Kind, api.ClusterResourceOverrideKind, api.ResourceOverrideKind)
	}
	return required("override.name", k.Name)
}

func validateStagedUpdateUpserted(p any) error {
	v := p.(*StagedUpdateUpserted)
	if (v.ClusterStagedUpdateStrategy == nil) == (v.ClusterStagedUpdateRun == nil) {
		return errors.New("exactly one of clusterStagedUpdateStrategy and clusterStagedUpdateRun must be set")
	}
	if v.ClusterStagedUpdateStrategy != nil {
		return prefixed("clusterStagedUpdateStrategy", api.Validate(clone(v.ClusterStagedUpdateStrategy)).ToError())
	}
	return prefixed("clusterStagedUpdateRun", api.Validate(clone(v.ClusterStagedUpdateRun)).ToError())
}

func validateStagedUpdateDeleted(p any) error {
	k := p.(*StagedUpdateDeleted).Object
	switch k.Kind {
	case api.ClusterStagedUpdateStrategyKind, api.ClusterStagedUpdateRunKind:
	default:
		return fmt.Errorf("object.kind: %q is not %s or %s", k.Kind, api.ClusterStagedUpdateStrategyKind, api.ClusterStagedUpdateRunKind)
	}
	return required("object.name", k.Name)
}

func validateApprovalRequestApproved(p any) error {
	v := p.(*ApprovalRequestApproved)
	if len(v.Message) > MaxMessageBytes {
		return fmt.Errorf("message: %d bytes, over the bound of %d", len(v.Message), MaxMessageBytes)
	}
	return required("name", v.Name)
}

func validateDisruptionUpserted(p any) error {
	v := p.(*DisruptionUpserted)
	if (v.ClusterResourcePlacementEviction == nil) == (v.ClusterResourcePlacementDisruptionBudget == nil) {
		return errors.New("exactly one of clusterResourcePlacementEviction and clusterResourcePlacementDisruptionBudget must be set")
	}
	if v.ClusterResourcePlacementEviction != nil {
		return prefixed("clusterResourcePlacementEviction", api.Validate(clone(v.ClusterResourcePlacementEviction)).ToError())
	}
	return prefixed("clusterResourcePlacementDisruptionBudget", api.Validate(clone(v.ClusterResourcePlacementDisruptionBudget)).ToError())
}

func validateDisruptionDeleted(p any) error {
	k := p.(*DisruptionDeleted).Object
	if err := checkDisruptionKind(k.Kind); err != nil {
		return fmt.Errorf("object.kind: %w", err)
	}
	return required("object.name", k.Name)
}

// checkDisruptionKind accepts the kinds of flotilla.disruption.>.
func checkDisruptionKind(kind string) error {
	switch kind {
	case api.ClusterResourcePlacementEvictionKind, api.ClusterResourcePlacementDisruptionBudgetKind:
		return nil
	}
	return fmt.Errorf("%q is not %s or %s", kind, api.ClusterResourcePlacementEvictionKind, api.ClusterResourcePlacementDisruptionBudgetKind)
}

func validateMemberLeft(p any) error {
	v := p.(*MemberLeft)
	switch v.LeavePolicy {
	case "", LeaveKeep, LeaveDelete:
	default:
		return fmt.Errorf("leavePolicy: %q is not Keep or Delete", v.LeavePolicy)
	}
	return required("name", v.Name)
}

func validateMemberHeartbeat(p any) error {
	v := p.(*MemberHeartbeat)
	if v.ObservedAt.IsZero() {
		return errors.New("observedAt: required")
	}
	if err := api.ValidatePropertyValues(v.Properties, field.NewPath("properties")).ToError(); err != nil {
		return err
	}
	if err := api.ValidateMemberNamespaces(v.Namespaces, field.NewPath("namespaces")).ToError(); err != nil {
		return err
	}
	return required("name", v.Name)
}

func validateHubResourceUpserted(p any) error {
	v := p.(*HubResourceUpserted)
	switch {
	case len(v.Manifest) == 0 && v.ManifestRef == nil:
		return errors.New("manifest: required (or manifestRef)")
	case len(v.Manifest) > 0 && v.ManifestRef != nil:
		return errors.New("manifest and manifestRef: give one, not both")
	case len(v.Manifest) > InlineManifestBytes:
		return fmt.Errorf("manifest: %d bytes inline, over %d: send it as a blob (manifestRef)", len(v.Manifest), InlineManifestBytes)
	case v.ManifestRef != nil:
		if err := v.ManifestRef.Validate(bus.SubjectHubBlobPrefix); err != nil {
			return fmt.Errorf("manifestRef: %w", err)
		}
	}
	return nil
}

func validateHubResourceDeleted(p any) error {
	r := p.(*HubResourceDeleted).Resource
	return errors.Join(required("resource.version", r.Version), required("resource.kind", r.Kind), required("resource.name", r.Name))
}

func validatePlacementScheduled(p any) error {
	v := p.(*PlacementScheduled)
	errs := []error{required("placement", v.Placement)}
	for i, c := range v.Chosen {
		errs = append(errs, required(fmt.Sprintf("chosen[%d].cluster", i), c.Cluster))
	}
	return errors.Join(errs...)
}

// MaxSnapshotPieces bounds the pieces of one snapshot: a million resources.
const MaxSnapshotPieces = 1000

func validateSnapshotCreated(p any) error {
	v := p.(*SnapshotCreated)
	errs := []error{required("placement", v.Placement), required("hash", v.Hash)}
	switch {
	case v.Index < 0:
		errs = append(errs, fmt.Errorf("index: %d is negative", v.Index))
	case v.Pieces < 0 || v.Pieces > MaxSnapshotPieces:
		errs = append(errs, fmt.Errorf("pieces: %d is not between 0 and %d", v.Pieces, MaxSnapshotPieces))
	case v.Piece < 0 || v.Piece >= max(v.Pieces, 1):
		errs = append(errs, fmt.Errorf("piece: %d is not below pieces (%d)", v.Piece, max(v.Pieces, 1)))
	case len(v.SelectedResources) > MaxPieceClusters:
		errs = append(errs, fmt.Errorf("selectedResources: %d in one piece, over %d", len(v.SelectedResources), MaxPieceClusters))
	case v.ResourceCount < 0:
		errs = append(errs, fmt.Errorf("resourceCount: %d is negative", v.ResourceCount))
	}
	return errors.Join(errs...)
}

func validateWorkDesired(p any) error {
	v := p.(*WorkDesired)
	if err := errors.Join(required("cluster", v.Cluster), required("placement", v.Placement)); err != nil {
		return err
	}
	if v.ManifestsRef == nil {
		return nil
	}
	if len(v.Manifests) > 0 {
		return errors.New("manifests and manifestsRef: give one, not both")
	}
	prefix, err := bus.WorkBlobPrefix(v.Cluster, v.Placement)
	if err != nil {
		return err
	}
	if err := v.ManifestsRef.Validate(prefix); err != nil {
		return fmt.Errorf("manifestsRef: %w", err)
	}
	return nil
}

func validateWorkTombstoned(p any) error {
	v := p.(*WorkTombstoned)
	return errors.Join(required("cluster", v.Cluster), required("placement", v.Placement))
}

func validateWorkRemoved(p any) error {
	v := p.(*WorkRemoved)
	errs := []error{required("cluster", v.Cluster), required("placement", v.Placement)}
	if v.TombstoneSequence == 0 {
		errs = append(errs, errors.New("tombstoneSequence: required"))
	}
	return errors.Join(errs...)
}

func validateRolloutProgressed(p any) error {
	return required("placement", p.(*RolloutProgressed).Placement)
}

func validateWorkReported(p any) error {
	v := p.(*WorkReported)
	errs := []error{required("cluster", v.Cluster), required("placement", v.Placement),
		maxItems("manifests", len(v.Manifests), MaxReportManifests), maxItems("takeovers", len(v.Takeovers), MaxReportTakeovers)}
	if c := v.Counts; c != nil && (c.Total < 0 || c.Applied < 0 || c.Available < 0 || c.Applied > c.Total || c.Available > c.Total ||
		c.NotTrackablePending > c.NotTrackable || c.NotTrackable > c.Total) {
		errs = append(errs, fmt.Errorf("counts: %+v do not add up", *c))
	}
	return errors.Join(errs...)
}

func validateTakeoversDecided(p any) error {
	v := p.(*TakeoversDecided)
	return errors.Join(required("cluster", v.Cluster), required("placement", v.Placement),
		maxItems("takeovers", len(v.Takeovers), MaxReportTakeovers))
}

func maxItems(field string, n, limit int) error {
	if n > limit {
		return fmt.Errorf("%s: %d items, over %d", field, n, limit)
	}
	return nil
}

func validatePlacementStatusChanged(p any) error {
	return required("placement.metadata.name", p.(*PlacementStatusChanged).Placement.Name)
}

func validateOutboxQuarantined(p any) error {
	v := p.(*OutboxQuarantined)
	errs := []error{required("eventId", v.EventID), required("type", v.Type), required("subject", v.Subject), required("reason", v.Reason)}
	if len(v.Reason) > MaxQuarantineReason {
		errs = append(errs, fmt.Errorf("reason: %d bytes, over %d", len(v.Reason), MaxQuarantineReason))
	}
	return errors.Join(errs...)
}
