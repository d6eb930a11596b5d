package events

// Event types. The suffix is the payload's schema version.
const (
	// Input: what users and fleetctl publish.
	TypePlacementUpserted   = "io.flotilla.placement.upserted.v1"
	TypePlacementDeleted    = "io.flotilla.placement.deleted.v1"
	TypeMemberJoined        = "io.flotilla.member.joined.v1"
	TypeMemberUpdated       = "io.flotilla.member.updated.v1"
	TypeMemberLeft          = "io.flotilla.member.left.v1"
	TypeHubResourceUpserted = "io.flotilla.hubresource.upserted.v1"
	TypeHubResourceDeleted  = "io.flotilla.hubresource.deleted.v1"
	TypeOverrideUpserted    = "io.flotilla.override.upserted.v1"
	TypeOverrideDeleted     = "io.flotilla.override.deleted.v1"
	// Staged updates: strategies and runs, and a user's approval of a stage.
	TypeStagedUpdateUpserted    = "io.flotilla.stagedupdate.upserted.v1"
	TypeStagedUpdateDeleted     = "io.flotilla.stagedupdate.deleted.v1"
	TypeApprovalRequestApproved = "io.flotilla.approvalrequest.approved.v1"
	// Evictions and disruption budgets.
	TypeDisruptionUpserted = "io.flotilla.disruption.upserted.v1"
	TypeDisruptionDeleted  = "io.flotilla.disruption.deleted.v1"

	// Scheduler.
	TypePlacementScheduled = "io.flotilla.placement.scheduled.v1"

	// Rollout.
	TypeSnapshotCreated   = "io.flotilla.resourcesnapshot.created.v1"
	TypeWorkDesired       = "io.flotilla.work.desired.v1"
	TypeWorkTombstoned    = "io.flotilla.work.tombstoned.v1"
	TypeRolloutProgressed = "io.flotilla.rollout.progressed.v1"

	// Apply workers.
	TypeWorkReported     = "io.flotilla.work.reported.v1"
	TypeTakeoversDecided = "io.flotilla.work.takeovers.v1"
	TypeMemberHeartbeat  = "io.flotilla.member.heartbeat.v1"
	TypeWorkRemoved      = "io.flotilla.work.removed.v1"

	// Status.
	TypePlacementStatusChanged = "io.flotilla.placementstatus.changed.v1"

	// Outbox relays of the hub services.
	TypeOutboxQuarantined = "io.flotilla.outbox.quarantined.v1"
)

// Version 2 of the types whose version 1 listed every cluster and so grew with
// the fleet (see "Revisions in pieces" in payloads_v2.go). The services publish
// only these; version 1 stays decodable for the events already on the bus and
// in the audit log.
const (
	TypePlacementScheduledV2     = "io.flotilla.placement.scheduled.v2"
	TypeRolloutProgressedV2      = "io.flotilla.rollout.progressed.v2"
	TypePlacementStatusChangedV2 = "io.flotilla.placementstatus.changed.v2"
)
