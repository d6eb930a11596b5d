package events

import (
	"encoding/json"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// PlacementUpserted creates or updates a ClusterResourcePlacement. The
// placement is as the user wrote it; consumers default and validate it.
type PlacementUpserted struct {
	Placement api.ClusterResourcePlacement `json:"placement"`
}

// PlacementDeleted deletes a placement: its resources are removed from every
// member per its delete strategy.
type PlacementDeleted struct {
	Name string `json:"name"`
}

// MemberJoined registers a member cluster, or re-registers one that left.
type MemberJoined struct {
	Member api.MemberCluster `json:"member"`
}

// MemberUpdated changes a member's labels, taints or heartbeat period.
type MemberUpdated struct {
	Member api.MemberCluster `json:"member"`
}

// MemberLeft removes a member from scheduling. What happens to the objects
// placed on it is the member's leave policy: Keep leaves them running
// (upstream Fleet's behaviour), Delete removes what Flotilla owns.
type MemberLeft struct {
	Name        string      `json:"name"`
	LeavePolicy LeavePolicy `json:"leavePolicy,omitempty"`
}

// LeavePolicy says what a leaving member keeps.
type LeavePolicy string

const (
	LeaveKeep   LeavePolicy = "Keep"
	LeaveDelete LeavePolicy = "Delete"
)

// MemberHeartbeat is published by a member's apply worker every heartbeat
// period with the cluster's properties and health.
type MemberHeartbeat struct {
	Name string `json:"name"`
	// Healthy is false when the member's API server could not be reached;
	// Message then says why.
	Healthy    bool                                   `json:"healthy"`
	Message    string                                 `json:"message,omitempty"`
	Properties map[api.PropertyName]api.PropertyValue `json:"properties,omitempty"`
	// ResourceUsage is computed from the member's Node objects.
	ResourceUsage api.ResourceUsage `json:"resourceUsage"`
	// Namespaces are the member's namespaces (api.MemberClusterStatus.Namespaces),
	// at most api.MaxMemberNamespaces. Nil from a worker that does not report
	// them: no ResourcePlacement is scheduled onto that member, as upstream.
	Namespaces map[string]string `json:"namespaces,omitempty"`
	ObservedAt time.Time         `json:"observedAt"`
}

// Inline bounds: content over these travels as a blob (a claim check, see bus.BlobRef).
const (
	// InlineManifestsBytes bounds the encoded Manifests of a WorkDesired.
	InlineManifestsBytes = 256 << 10
	// InlineManifestBytes bounds the Manifest of a HubResourceUpserted.
	InlineManifestBytes = 256 << 10
)

// HubResourceUpserted puts a Kubernetes manifest into the hub store, where
// placements select it. Server-populated fields are stripped on the way in.
//
// Size bound: InlineManifestBytes of manifest and a few hundred bytes more. A larger
// object (Kubernetes allows 1.5 MiB) travels as a blob: ManifestRef names it in
// bus.StreamHubBlobs and Manifest is empty.
type HubResourceUpserted struct {
	Manifest    json.RawMessage `json:"manifest,omitempty"`
	ManifestRef *bus.BlobRef    `json:"manifestRef,omitempty"`
}

// HubResourceDeleted removes a manifest from the hub store.
type HubResourceDeleted struct {
	Resource api.ResourceIdentifier `json:"resource"`
}

// OverrideUpserted creates or updates a ClusterResourceOverride or a
// ResourceOverride, as the user wrote it (in any version upstream's documentation
// uses): exactly one of the two is set. Consumers default and validate it, and
// refuse an override that selects an object another override of its kind
// already selects (api.OverrideConflicts).
//
// Size bound: an override holds at most 20 selectors and 20 rules of 20 patches;
// its patch values make the rest (an object, at most api.MaxObjectBytes, is larger).
type OverrideUpserted struct {
	ClusterResourceOverride *api.ClusterResourceOverride `json:"clusterResourceOverride,omitempty"`
	ResourceOverride        *api.ResourceOverride        `json:"resourceOverride,omitempty"`
}

// Object is the override the event carries, nil when it carries none.
func (p *OverrideUpserted) Object() api.Object {
	switch {
	case p.ClusterResourceOverride != nil:
		return p.ClusterResourceOverride
	case p.ResourceOverride != nil:
		return p.ResourceOverride
	}
	return nil
}

// Key names the override the event carries.
func (p *OverrideUpserted) Key() api.OverrideKey {
	switch {
	case p.ClusterResourceOverride != nil:
		return api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: p.ClusterResourceOverride.Name}
	case p.ResourceOverride != nil:
		return api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: p.ResourceOverride.Namespace, Name: p.ResourceOverride.Name}
	}
	return api.OverrideKey{}
}

// OverrideDeleted deletes an override; the placements it concerned roll out
// without it (at once when it named its placement, else from their next
// resource snapshot).
type OverrideDeleted struct {
	Override api.OverrideKey `json:"override"`
}

// StagedUpdateUpserted creates or updates a ClusterStagedUpdateStrategy or a
// ClusterStagedUpdateRun (its spec; a run's status is the rollout's): exactly
// one is set. The rollout defaults and validates it and refuses a change of a
// run's immutable fields.
//
// Size bound: a strategy holds at most 31 stages of a selector and 3 tasks
// each; a run, its spec. A status sent along is dropped, never stored, so the
// bound is that of the user's YAML (api.MaxObjectBytes at most).
type StagedUpdateUpserted struct {
	ClusterStagedUpdateStrategy *api.ClusterStagedUpdateStrategy `json:"clusterStagedUpdateStrategy,omitempty"`
	ClusterStagedUpdateRun      *api.ClusterStagedUpdateRun      `json:"clusterStagedUpdateRun,omitempty"`
}

// Object is the strategy or run the event carries, nil when it carries none.
func (p *StagedUpdateUpserted) Object() api.Object {
	switch {
	case p.ClusterStagedUpdateStrategy != nil:
		return p.ClusterStagedUpdateStrategy
	case p.ClusterStagedUpdateRun != nil:
		return p.ClusterStagedUpdateRun
	}
	return nil
}

// Key names the object the event carries.
func (p *StagedUpdateUpserted) Key() StagedUpdateKey {
	switch {
	case p.ClusterStagedUpdateStrategy != nil:
		return StagedUpdateKey{Kind: api.ClusterStagedUpdateStrategyKind, Name: p.ClusterStagedUpdateStrategy.Name}
	case p.ClusterStagedUpdateRun != nil:
		return StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: p.ClusterStagedUpdateRun.Name}
	}
	return StagedUpdateKey{}
}

// StagedUpdateKey names a staged update object: its kind
// (ClusterStagedUpdateStrategy, ClusterStagedUpdateRun or
// ClusterApprovalRequest) and name.
type StagedUpdateKey struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func (k StagedUpdateKey) String() string { return k.Kind + "/" + k.Name }

// StagedUpdateDeleted deletes a strategy or a run. A deleted run stops where
// it is: what it rolled out stays; its approval requests go with it.
//
// Size bound: two names.
type StagedUpdateDeleted struct {
	Object StagedUpdateKey `json:"object"`
}

// ApprovalRequestApproved sets the condition Approved of a
// ClusterApprovalRequest (fleetctl approve clusterapprovalrequest NAME): the
// run waiting for it goes on.
//
// Size bound: a name and a message of at most MaxMessageBytes.
type ApprovalRequestApproved struct {
	Name    string `json:"name"`
	Message string `json:"message,omitempty"`
}

// DisruptionUpserted creates a ClusterResourcePlacementEviction or creates or
// updates a ClusterResourcePlacementDisruptionBudget: exactly one is set. The
// scheduler, which owns decisions, runs each eviction once and keeps both; an
// eviction's status sent along is dropped, never stored.
//
// Size bound: an eviction names a placement and a cluster; a budget, two
// numbers. Both are user YAML (api.MaxObjectBytes at most).
type DisruptionUpserted struct {
	ClusterResourcePlacementEviction         *api.ClusterResourcePlacementEviction         `json:"clusterResourcePlacementEviction,omitempty"`
	ClusterResourcePlacementDisruptionBudget *api.ClusterResourcePlacementDisruptionBudget `json:"clusterResourcePlacementDisruptionBudget,omitempty"`
}

// Object is the eviction or budget the event carries, nil when it carries none.
func (p *DisruptionUpserted) Object() api.Object {
	switch {
	case p.ClusterResourcePlacementEviction != nil:
		return p.ClusterResourcePlacementEviction
	case p.ClusterResourcePlacementDisruptionBudget != nil:
		return p.ClusterResourcePlacementDisruptionBudget
	}
	return nil
}

// Key names the object the event carries.
func (p *DisruptionUpserted) Key() DisruptionKey {
	switch {
	case p.ClusterResourcePlacementEviction != nil:
		return DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: p.ClusterResourcePlacementEviction.Name}
	case p.ClusterResourcePlacementDisruptionBudget != nil:
		return DisruptionKey{Kind: api.ClusterResourcePlacementDisruptionBudgetKind, Name: p.ClusterResourcePlacementDisruptionBudget.Name}
	}
	return DisruptionKey{}
}

// DisruptionKey names an eviction or a disruption budget: its kind and name.
type DisruptionKey struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func (k DisruptionKey) String() string { return k.Kind + "/" + k.Name }

// DisruptionDeleted deletes an eviction (what it did stays done) or a budget.
//
// Size bound: two names.
type DisruptionDeleted struct {
	Object DisruptionKey `json:"object"`
}

// DecisionAction says what a scheduling decision did to one cluster.
type DecisionAction string

const (
	ActionAdded   DecisionAction = "added"
	ActionKept    DecisionAction = "kept"
	ActionRemoved DecisionAction = "removed"
	// ActionLost: the placement failed over away from the cluster, which is down;
	// the copy it holds stays until it is back and the placement is available
	// on the chosen clusters (make-before-break).
	ActionLost DecisionAction = "lost"
	// ActionReleased: the placement leaves the cluster make-before-break (a
	// lost cluster that is back, or the replacement left by a failback): its
	// copy is removed once the placement is available on the chosen clusters.
	ActionReleased DecisionAction = "released"
)

// ClusterDecision is the scheduler's verdict on one cluster.
type ClusterDecision struct {
	Cluster             string         `json:"cluster"`
	Action              DecisionAction `json:"action,omitempty"`
	AffinityScore       int32          `json:"affinityScore"`
	TopologySpreadScore int32          `json:"topologySpreadScore"`
	// Reason is a sentence: why a cluster was picked, removed or rejected.
	Reason string `json:"reason"`
	// FailoverReason and FailoverMessage say what failover did on the cluster
	// (api.ClusterLostReason, ...), when it did anything.
	FailoverReason  string `json:"failoverReason,omitempty"`
	FailoverMessage string `json:"failoverMessage,omitempty"`
}

// PlacementScheduled is one scheduling decision for a placement: the clusters
// it is bound to now, those it was removed from, and why others were not chosen.
//
// Superseded: it lists every cluster, so it grows with the fleet (over 1 MB
// at a few thousand members). The scheduler publishes PlacementScheduledV2;
// this version stays decodable for the events already published.
type PlacementScheduled struct {
	Placement string `json:"placement"`
	// Generation is the placement generation the decision answers.
	Generation    int64             `json:"generation"`
	PlacementType api.PlacementType `json:"placementType"`
	// Wanted is the number of clusters the policy asks for (0 for PickAll).
	Wanted    int               `json:"wanted"`
	Chosen    []ClusterDecision `json:"chosen"`
	Removed   []ClusterDecision `json:"removed,omitempty"`
	NotChosen []ClusterDecision `json:"notChosen,omitempty"`
	// Fulfilled is false when fewer clusters than wanted were found; Message
	// then says how many were found and why others were rejected.
	Fulfilled bool   `json:"fulfilled"`
	Message   string `json:"message,omitempty"`
}

// SnapshotCreated records an immutable resource snapshot of a placement and
// the resources it selected. The list grows with the placement, so a snapshot
// travels in Pieces events (at least one), numbered by Piece from 0, each
// listing at most MaxPieceClusters resources in the snapshot's order and
// repeating the other fields; a consumer takes the snapshot once it holds
// every piece of its index. Events from before pieces have Pieces 0: one
// piece with the whole list.
//
// Size bound: at most MaxPieceClusters (1,000) resources and MaxPieceBytes
// (256 KiB) of JSON per piece, whatever the size of the placement.
// TestSnapshotPiecesStayBounded holds it.
type SnapshotCreated struct {
	Placement string `json:"placement"`
	Index     int64  `json:"index"`
	Hash      string `json:"hash"`
	Piece     int    `json:"piece,omitempty"`
	Pieces    int    `json:"pieces,omitempty"`
	// ResourceCount is the length of the whole list, for a consumer to
	// check what it assembled.
	ResourceCount     int                      `json:"resourceCount,omitempty"`
	SelectedResources []api.ResourceIdentifier `json:"selectedResources"`
}

// Part is the piece's place among its snapshot's pieces: the snapshot index
// stands for the revision, and every snapshot is whole (a base).
func (s SnapshotCreated) Part() Part {
	return Part{Revision: s.Index, Base: true, Piece: s.Piece, Pieces: max(s.Pieces, 1)}
}

// WorkDesired is the complete desired state of one placement on one cluster.
// It is the last value on its subject, so a restarted apply worker rebuilds
// from the stream alone.
//
// Size bound: InlineManifestsBytes of manifests plus the strategies (a few KiB). Work
// whose manifests encode larger carries ManifestsRef instead, whatever the placement's
// size (up to bus.MaxBlobBytes).
type WorkDesired struct {
	Cluster   string `json:"cluster"`
	Placement string `json:"placement"`
	// ResourceIndex names the resource snapshot the manifests come from.
	ResourceIndex int64             `json:"resourceIndex"`
	ResourceHash  string            `json:"resourceHash"`
	Generation    int64             `json:"generation"`
	Manifests     []json.RawMessage `json:"manifests"`
	// ManifestsRef, when set, stands for Manifests (then empty): the JSON array of the
	// manifests is a blob in bus.StreamWorkBlobs under bus.WorkBlobPrefix(Cluster,
	// Placement), where only this cluster's worker may read it.
	ManifestsRef   *bus.BlobRef       `json:"manifestsRef,omitempty"`
	ApplyStrategy  api.ApplyStrategy  `json:"applyStrategy"`
	DeleteStrategy api.DeleteStrategy `json:"deleteStrategy"`
	// UnavailablePeriodSeconds is how long a not-trackable object must have
	// been applied before it counts as available.
	UnavailablePeriodSeconds int `json:"unavailablePeriodSeconds"`
}

// WorkTombstoned tells a cluster's apply worker to remove what a placement
// put there: the placement was deleted or the cluster unscheduled.
type WorkTombstoned struct {
	Cluster        string             `json:"cluster"`
	Placement      string             `json:"placement"`
	DeleteStrategy api.DeleteStrategy `json:"deleteStrategy"`
	Reason         string             `json:"reason"`
}

// ClusterRollout is the rollout state of one placement on one cluster.
type ClusterRollout struct {
	Cluster string `json:"cluster"`
	// Started is true once the cluster has been sent the placement's current
	// resource snapshot; Reason and Message say what holds it back otherwise.
	Started       bool   `json:"started"`
	ResourceIndex int64  `json:"resourceIndex"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	// Stuck is set when the cluster has not become applied and available
	// within the rollout deadline.
	Stuck bool `json:"stuck,omitempty"`
	// Overrides: see ClusterProgress.Overrides. Only assembled progress
	// (revision.Progress) holds it; v1 events never carried it.
	Overrides *ClusterOverrides `json:"overrides,omitempty"`
}

// RolloutProgressed reports the rollout of a placement's current snapshot.
//
// Superseded: it lists every scheduled cluster, so it grows with the fleet.
// The rollout publishes RolloutProgressedV2; this version stays decodable.
type RolloutProgressed struct {
	Placement     string `json:"placement"`
	Generation    int64  `json:"generation"`
	ResourceIndex int64  `json:"resourceIndex"`
	// Reason and Message report a problem of the whole placement, such as
	// InvalidResourceSelectors, also when no cluster is scheduled.
	Reason   string           `json:"reason,omitempty"`
	Message  string           `json:"message,omitempty"`
	Clusters []ClusterRollout `json:"clusters"`
}

// ManifestResult is the outcome of one manifest on one cluster.
type ManifestResult struct {
	Resource api.ResourceIdentifier `json:"resource"`
	// Applied and Available hold the per-manifest conditions with the
	// contract's reasons (ManifestApplyFailed, NotTakenOver, NotTrackable, ...).
	Applied   Condition `json:"applied"`
	Available Condition `json:"available"`
	// ObservedGeneration is the member object's generation after the apply.
	ObservedGeneration int64             `json:"observedGeneration,omitempty"`
	Drifts             []api.PatchDetail `json:"drifts,omitempty"`
	FirstDriftedAt     *time.Time        `json:"firstDriftedAt,omitempty"`
	Diffs              []api.PatchDetail `json:"diffs,omitempty"`
	FirstDiffedAt      *time.Time        `json:"firstDiffedAt,omitempty"`
}

// Condition is a per-manifest condition: Status is True, False or Unknown.
type Condition struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// TakeoverDecision records what an apply worker did with an object it found
// on a member that Flotilla did not own.
type TakeoverDecision struct {
	Resource   api.ResourceIdentifier   `json:"resource"`
	Mode       api.WhenToTakeOverType   `json:"mode"`
	Comparison api.ComparisonOptionType `json:"comparison"`
	// Outcome is TakenOver, FailedToTakeOver or NotTakenOver.
	Outcome string `json:"outcome"`
	// Diffs are the differences that refused a takeover (values of Secrets
	// are redacted).
	Diffs     []api.PatchDetail `json:"diffs,omitempty"`
	DecidedAt time.Time         `json:"decidedAt"`
}

// WorkReported is an apply worker's result for one placement on its cluster.
//
// Size bound: at most MaxReportManifests manifests in at most
// MaxReportManifestBytes of JSON, and at most MaxReportTakeovers takeover
// decisions in at most MaxReportTakeoverBytes, whatever the size of the
// placement (see BoundManifests and SplitTakeovers, which producers call; TestReportStaysBounded
// holds it with 5,000 failing manifests).
type WorkReported struct {
	Cluster       string `json:"cluster"`
	Placement     string `json:"placement"`
	ResourceIndex int64  `json:"resourceIndex"`
	Generation    int64  `json:"generation"`
	// Deleted is true when the report answers a tombstone: the placement's
	// objects are gone from (or abandoned on) the cluster.
	Deleted bool `json:"deleted,omitempty"`
	// Manifests lists the manifests' results in the work's order: all of
	// them when they fit within the bounds, else only those worth showing:
	// each manifest that failed to apply, is not available yet, drifted or
	// differs, at most api.MaxReportedPlacements of each kind (the status
	// shows no more); a manifest applied and available with nothing to show
	// is then only counted.
	Manifests []ManifestResult `json:"manifests"`
	// Counts summarise every manifest of the work, listed or not.
	Counts *ManifestCounts `json:"counts,omitempty"`
	// Takeovers are the decisions of the apply run this report answers;
	// those beyond the bound follow in TakeoversDecided events.
	Takeovers []TakeoverDecision `json:"takeovers,omitempty"`
	// Applied and Available summarise the manifests for the cluster.
	Applied      Condition  `json:"applied"`
	Available    Condition  `json:"available"`
	DiffReported *Condition `json:"diffReported,omitempty"`
	ObservedAt   time.Time  `json:"observedAt"`
}

// ManifestCounts count a report's manifests by their results.
type ManifestCounts struct {
	Total int `json:"total"`
	// Applied and Available count the manifests whose condition is True.
	Applied   int `json:"applied"`
	Available int `json:"available"`
	// NotTrackable counts the manifests whose availability cannot be
	// tracked (reason NotTrackable), and NotTrackablePending those of them
	// not counted available yet.
	NotTrackable        int `json:"notTrackable,omitempty"`
	NotTrackablePending int `json:"notTrackablePending,omitempty"`
	Drifted             int `json:"drifted,omitempty"`
	Diffed              int `json:"diffed,omitempty"`
	// Unlisted counts the manifests worth showing that the bounds left out
	// of the report's list.
	Unlisted int `json:"unlisted,omitempty"`
}

// TakeoversDecided carries the takeover decisions of one apply run that did
// not fit in its WorkReported (a run that adopts many existing objects): the
// apply worker sends them before the report, in events of at most
// MaxReportTakeovers decisions and MaxReportTakeoverBytes each, so that the
// audit trail records every decision.
//
// Size bound: that of WorkReported's takeovers, plus two names.
type TakeoversDecided struct {
	Cluster       string             `json:"cluster"`
	Placement     string             `json:"placement"`
	ResourceIndex int64              `json:"resourceIndex"`
	Generation    int64              `json:"generation"`
	Takeovers     []TakeoverDecision `json:"takeovers"`
}

// WorkRemoved is an apply worker's record that it carried out a tombstone: what the
// placement had put on the cluster is gone (or, with an Abandon delete strategy, left
// alone). The worker publishes it on the WORK stream, at WorkRemovedSubject, where it outlives
// restarts like the tombstone itself; a restarted worker that finds it does not carry out the
// same tombstone again (with a full scan of its member). Only a member's own worker writes
// it, and it tells only that worker something.
//
// Size bound: two names (each at most 253 bytes), a number and a time: under 1 KB.
type WorkRemoved struct {
	Cluster   string `json:"cluster"`
	Placement string `json:"placement"`
	// TombstoneSequence is the WORK stream sequence of the tombstone carried out.
	TombstoneSequence uint64    `json:"tombstoneSequence"`
	RemovedAt         time.Time `json:"removedAt"`
}

// PlacementStatusChanged carries a placement with its new Fleet-shaped status.
//
// Superseded: it carries the whole status, which grows with the fleet. The
// status service publishes PlacementStatusChangedV2; this version stays
// decodable.
type PlacementStatusChanged struct {
	Placement api.ClusterResourcePlacement `json:"placement"`
}

// OutboxQuarantined says that a hub service's outbox set an event aside that
// it could never publish: over the bus's size limit when enqueued or
// published, headers that do not decode, or too many failed attempts. The
// event stays in the service's database (view outbox_quarantine); the events
// behind it are published. Placement and Cluster are set when the event's
// subject names them, so that the status service can show the problem in the
// placement's status.
//
// Size bound: names (each at most 253 bytes), the subject, a type, an id and
// a reason of at most MaxQuarantineReason bytes: under 3 KB.
type OutboxQuarantined struct {
	EventID   string `json:"eventId"`
	Type      string `json:"type"`
	Subject   string `json:"subject"`
	Placement string `json:"placement,omitempty"`
	Cluster   string `json:"cluster,omitempty"`
	// Size is the encoded message (headers and payload) in bytes; Limit is
	// the bus's limit on one message when the size was the reason.
	Size  int64 `json:"size"`
	Limit int64 `json:"limit,omitempty"`
	// Attempts counts the failed publishes (0 when quarantined at enqueue).
	Attempts      int       `json:"attempts"`
	Reason        string    `json:"reason"`
	QuarantinedAt time.Time `json:"quarantinedAt"`
}

// MaxQuarantineReason bounds OutboxQuarantined.Reason, in bytes.
const MaxQuarantineReason = 1024
