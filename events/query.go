package events

import (
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Queries are answered by the status service over NATS request-reply (a
// nats.go micro service named QueryService). Requests are JSON. Every reply
// is the JSON of a QueryReply; an error reply sets Error and the micro error
// headers (Nats-Service-Error, Nats-Service-Error-Code).
//
// # Bounded replies
//
// A reply grows with the fleet (a placement on 5,000 clusters is several MB,
// over NATS's 1 MB message limit), so it travels as a stream of pieces, none
// over QueryReplyPieceBytes of JSON (package events/reply implements both
// ends):
//
//   - The client subscribes to a private inbox (nc.NewInbox, which keeps a
//     credential's inbox prefix) and publishes the request with that inbox
//     as its reply subject.
//   - The service publishes pieces 0, 1, ... on the inbox. A piece's data is
//     the next at most QueryReplyPieceBytes of the reply's JSON (less when the
//     server's max_payload asks for it); its QueryReplyPieceHeader is its
//     index. The last piece also carries QueryReplyBytesHeader (the whole
//     reply's length) and QueryReplyDigestHeader ("sha256=" and the hex
//     SHA-256 of the whole reply): that marks it last. A reply of one piece is
//     the whole JSON in one message, as before pieces.
//   - An error may end a reply at any point: a message with micro's error
//     headers and, as data, a QueryReply with Error set. Before any piece it
//     is the whole answer, as before pieces.
//   - A first message without QueryReplyPieceHeader is a whole reply (a
//     service from before pieces).
//   - The client waits for each piece in turn, its timeout per piece (a long
//     reply is not a slow one), and fails, never printing what it has, on a
//     piece missing, twice, out of order or over the bound, a length or digest
//     that does not match, or a reply over QueryReplyMaxBytes. The service
//     stops at that cap too, with an error reply saying so.
//
// Why a stream rather than pages (limit and a continue token): one request
// reads one snapshot (a list pages through PostgreSQL with keyset pagination
// in one read-only repeatable-read transaction) and serialises a huge object
// once, where chunks asked for one by one would read and serialise it once per
// chunk and could mix two versions; no token or state has to survive between
// requests that micro's queue group may hand to different replicas; and core
// NATS keeps the order of the messages of one publisher to one subscriber, so
// pieces need no acknowledgements (the checks catch what a slow consumer
// drops). The service stays a micro service: a handler publishes each piece to
// the request's reply subject (micro.Request.Reply) and answers an error with
// micro.Request.Error, so the endpoint's stats count requests, time and errors.
const (
	QueryService = "flotilla-status"
	// QuerySubjectPrefix is followed by the endpoint name.
	QuerySubjectPrefix = "flotilla.query."

	// QueryReplyPieceBytes bounds the data of one reply message: well under
	// NATS's default 1 MB max_payload, with room for the headers (under
	// 1 KiB).
	QueryReplyPieceBytes = 256 << 10
	// QueryReplyMaxBytes caps a whole reply: past it the service answers an
	// error and the client stops reading.
	QueryReplyMaxBytes = 64 << 20

	// QueryReplyPieceHeader is a piece's index in its reply, from 0.
	QueryReplyPieceHeader = "Flotilla-Reply-Piece"
	// QueryReplyBytesHeader, on the last piece, is the length of the whole
	// reply in bytes.
	QueryReplyBytesHeader = "Flotilla-Reply-Bytes"
	// QueryReplyDigestHeader, on the last piece, is the digest of the whole
	// reply: "sha256=" and the SHA-256 in lower-case hex.
	QueryReplyDigestHeader = "Flotilla-Reply-Digest"

	QueryGetPlacement   = "placement.get"     // NameQuery -> api.ClusterResourcePlacement
	QueryListPlacements = "placement.list"    // ListQuery -> []api.ClusterResourcePlacement
	QueryGetMember      = "member.get"        // NameQuery -> api.MemberCluster
	QueryListMembers    = "member.list"       // ListQuery -> []api.MemberCluster
	QueryHistory        = "placement.history" // HistoryQuery -> PlacementHistory
	QueryTakeovers      = "takeover.list"     // TakeoverQuery -> []TakeoverRecord
	QueryGetOverride    = "override.get"      // OverrideQuery -> api.ClusterResourceOverride or api.ResourceOverride
	QueryListOverrides  = "override.list"     // OverrideListQuery -> the overrides, by namespace and name
	// Staged updates: ClusterStagedUpdateStrategy, ClusterStagedUpdateRun (with
	// the run's status) and ClusterApprovalRequest, as the rollout keeps them.
	QueryGetStagedUpdate   = "stagedupdate.get"  // StagedUpdateKey -> the object of that kind
	QueryListStagedUpdates = "stagedupdate.list" // StagedUpdateListQuery -> the objects of a kind, by name
	// Evictions (with the status the scheduler gave them) and disruption budgets.
	QueryGetDisruption   = "disruption.get"  // DisruptionKey -> the object of that kind
	QueryListDisruptions = "disruption.list" // DisruptionListQuery -> the objects of a kind, by name
)

// DisruptionListQuery asks for the evictions or the disruption budgets,
// optionally filtered by a label selector in kubectl syntax.
type DisruptionListQuery struct {
	Kind          string `json:"kind"`
	LabelSelector string `json:"labelSelector,omitempty"`
}

// StagedUpdateListQuery asks for the staged update objects of a kind,
// optionally filtered by a label selector in kubectl syntax.
type StagedUpdateListQuery struct {
	// Kind is a cluster-scoped kind, or its namespaced twin
	// (api.StagedUpdateRunKind, ...) to list those, of Namespace (of every
	// namespace when it is empty).
	Kind          string `json:"kind"`
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
}

// OverrideQuery asks for one override: Kind is api.ClusterResourceOverrideKind
// or api.ResourceOverrideKind, Namespace empty for the former.
type OverrideQuery struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// OverrideListQuery asks for the overrides of a kind, of one namespace when
// Namespace is set, optionally filtered by a label selector in kubectl syntax.
type OverrideListQuery struct {
	Kind          string `json:"kind"`
	Namespace     string `json:"namespace,omitempty"`
	LabelSelector string `json:"labelSelector,omitempty"`
}

// NameQuery asks for one object by name.
type NameQuery struct {
	Name string `json:"name"`
}

// HistoryQuery asks for a placement's history (a NameQuery is one): SkipRuns leaves out
// the newest staged update runs, to page back through them.
type HistoryQuery struct {
	Name     string `json:"name"`
	SkipRuns int    `json:"skipRuns,omitempty"`
}

// ListQuery asks for every object, optionally filtered by a label selector
// in kubectl syntax.
type ListQuery struct {
	LabelSelector string `json:"labelSelector,omitempty"`
	// Kind, for a list of placements, is ResourcePlacement to list those
	// (of Namespace, or of every namespace when it is empty); otherwise the
	// ClusterResourcePlacements are listed.
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// TakeoverQuery asks for takeover decisions, optionally of one placement.
type TakeoverQuery struct {
	Placement string `json:"placement,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// QueryReply wraps every reply.
type QueryReply[T any] struct {
	Result T      `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// NotFound is set with Error when the named object does not exist.
	NotFound bool `json:"notFound,omitempty"`
}

// PlacementHistory is what fleetctl history shows: the placement's resource
// snapshots (revisions) and its scheduling decisions, oldest first.
type PlacementHistory struct {
	Placement string            `json:"placement"`
	Snapshots []SnapshotRecord  `json:"snapshots"`
	Decisions []DecisionRecord  `json:"decisions"`
	Status    []ConditionRecord `json:"statusTransitions,omitempty"`
	// Runs are staged update runs of an External placement, oldest first: which
	// run put which revision on which clusters. A page: the newest runs after
	// the query's SkipRuns, at most MaxHistoryRuns and MaxHistoryRunBytes of them.
	Runs []RunRecord `json:"stagedUpdateRuns,omitempty"`
	// RunsLeftOut counts the older runs not in Runs (ask again with SkipRuns
	// raised by len(Runs)); RunsSkipped echoes the query's SkipRuns.
	RunsLeftOut int `json:"stagedUpdateRunsLeftOut,omitempty"`
	RunsSkipped int `json:"stagedUpdateRunsSkipped,omitempty"`
	// Failovers are the placement's failover steps, oldest first (the newest
	// MaxFailoverRecords).
	Failovers []FailoverRecord `json:"failovers,omitempty"`
}

// MaxHistoryRuns and MaxHistoryRunBytes bound the staged update runs one
// history reply carries: a run lists every cluster it updated, so a page of
// runs of a large placement ends at the byte bound first (1,000 runs of 5,000
// clusters would be about 75 MB, over QueryReplyMaxBytes).
const (
	MaxHistoryRuns     = 1000
	MaxHistoryRunBytes = 16 << 20
)

// MaxFailoverRecords bounds the failover steps a history reply carries.
const MaxFailoverRecords = 200

// FailoverRecord is one failover step of a placement (table failover_history):
// Kind is lost, failover, returned or failback.
type FailoverRecord struct {
	Kind    string    `json:"kind"`
	From    string    `json:"from"`
	To      string    `json:"to,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// RunRecord is one staged update run of a placement.
type RunRecord struct {
	Name          string `json:"name"`
	Strategy      string `json:"strategy"`
	ResourceIndex string `json:"resourceIndex"`
	// Outcome is Succeeded, Failed, Progressing, Waiting, Stopped or
	// NotStarted, with Message from the condition that says so.
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	// Clusters are those the run updated, in stage order.
	Clusters  []string   `json:"clusters,omitempty"`
	Deleted   bool       `json:"deleted,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
}

// SnapshotRecord is one resource snapshot of a placement.
type SnapshotRecord struct {
	Index     int64                    `json:"index"`
	Hash      string                   `json:"hash"`
	Resources []api.ResourceIdentifier `json:"resources,omitempty"`
	CreatedAt time.Time                `json:"createdAt"`
}

// DecisionRecord is one row of scheduling history.
type DecisionRecord struct {
	PolicyGeneration    int64     `json:"policyGeneration"`
	Cluster             string    `json:"cluster"`
	Action              string    `json:"action"`
	AffinityScore       *int32    `json:"affinityScore,omitempty"`
	TopologySpreadScore *int32    `json:"topologySpreadScore,omitempty"`
	Reason              string    `json:"reason"`
	DecidedAt           time.Time `json:"decidedAt"`
}

// ConditionRecord is one transition of a placement or per-cluster condition.
type ConditionRecord struct {
	Cluster string    `json:"cluster,omitempty"`
	Type    string    `json:"type"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// TakeoverRecord is a stored takeover decision.
type TakeoverRecord struct {
	Placement string `json:"placement"`
	Cluster   string `json:"cluster"`
	TakeoverDecision
}
