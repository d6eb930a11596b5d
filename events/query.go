package events

import (
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Queries are answered by the status service over NATS request-reply (a
// nats.go micro service named QueryService). Requests and replies are JSON.
// Every reply is a QueryReply; an error reply sets Error and the micro
// error headers.
const (
	QueryService = "flotilla-status"
	// QuerySubjectPrefix is followed by the endpoint name.
	QuerySubjectPrefix = "flotilla.query."

	QueryGetPlacement   = "placement.get"     // NameQuery -> api.ClusterResourcePlacement
	QueryListPlacements = "placement.list"    // ListQuery -> []api.ClusterResourcePlacement
	QueryGetMember      = "member.get"        // NameQuery -> api.MemberCluster
	QueryListMembers    = "member.list"       // ListQuery -> []api.MemberCluster
	QueryHistory        = "placement.history" // NameQuery -> PlacementHistory
	QueryTakeovers      = "takeover.list"     // TakeoverQuery -> []TakeoverRecord
)

// NameQuery asks for one object by name.
type NameQuery struct {
	Name string `json:"name"`
}

// ListQuery asks for every object, optionally filtered by a label selector
// in kubectl syntax.
type ListQuery struct {
	LabelSelector string `json:"labelSelector,omitempty"`
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
