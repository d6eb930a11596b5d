package framework

// ReasonCode classifies why a cluster was not chosen or was removed. Codes are
// stable: they are stored in history and counted in summaries.
type ReasonCode string

// Reasons a cluster is rejected by a filter.
const (
	ReasonNotFound          ReasonCode = "ClusterNotFound"
	ReasonNotJoined         ReasonCode = "ClusterNotJoined"
	ReasonLeaving           ReasonCode = "ClusterLeaving"
	ReasonHeartbeatMissed   ReasonCode = "HeartbeatMissed"
	ReasonAffinityMismatch  ReasonCode = "AffinityMismatch"
	ReasonTaintNotTolerated ReasonCode = "TaintNotTolerated"
	ReasonTopologySpread    ReasonCode = "TopologySpreadViolated"
	// ReasonUnreachable: the member's heartbeats say its API server is unreachable.
	ReasonUnreachable ReasonCode = "ClusterUnreachable"
	// ReasonLost: the member has been down longer than the placement's failover
	// grace period; failover moved the placement away from it.
	ReasonLost ReasonCode = "ClusterLost"
	// ReasonNamespaceNotFound: a ResourcePlacement's namespace is not among
	// those the member reports.
	ReasonNamespaceNotFound ReasonCode = "NamespaceNotFound"
)

// Reasons a cluster is not chosen or removed that are not rejections.
const (
	// ReasonNotPicked: the cluster fits, but PickN had enough better clusters.
	ReasonNotPicked ReasonCode = "NotPicked"
	// ReasonLeft: the cluster is no longer a member of the fleet.
	ReasonLeft ReasonCode = "ClusterLeft"
	// ReasonScaledDown: numberOfClusters was lowered and the cluster scored lowest.
	ReasonScaledDown ReasonCode = "ScaledDown"
	// ReasonNotInClusterNames: a PickFixed policy no longer names the cluster.
	ReasonNotInClusterNames ReasonCode = "NotInClusterNames"
)

// Reason says why a cluster was not chosen or was removed. The zero Reason
// means the cluster passed.
type Reason struct {
	Code    ReasonCode `json:"code"`
	Message string     `json:"message"`
}

// Rejected reports whether the reason holds the cluster back.
func (r Reason) Rejected() bool { return r.Code != "" }

// String is the message.
func (r Reason) String() string { return r.Message }

// Rejection reports whether the code is a filter's rejection, the kind counted
// in SchedulingPolicyUnfulfilled summaries.
func (c ReasonCode) Rejection() bool {
	switch c {
	case ReasonNotFound, ReasonNotJoined, ReasonLeaving, ReasonHeartbeatMissed,
		ReasonAffinityMismatch, ReasonTaintNotTolerated, ReasonTopologySpread, ReasonUnreachable, ReasonLost,
		ReasonNamespaceNotFound:
		return true
	}
	return false
}

// Summary is the phrase for n clusters rejected with this code, as in
// "3 did not match required affinity"; summaries list codes in this order when
// counts tie.
func (c ReasonCode) Summary(n int) string {
	one := n == 1
	pick := func(singular, plural string) string {
		if one {
			return singular
		}
		return plural
	}
	switch c {
	case ReasonNotFound:
		return pick("was not found", "were not found")
	case ReasonNotJoined:
		return pick("has not joined the fleet", "have not joined the fleet")
	case ReasonLeaving:
		return pick("is leaving the fleet", "are leaving the fleet")
	case ReasonHeartbeatMissed:
		return "missed heartbeats"
	case ReasonAffinityMismatch:
		return "did not match required affinity"
	case ReasonTaintNotTolerated:
		return pick("is tainted", "are tainted")
	case ReasonTopologySpread:
		return "would violate topology spread constraints"
	case ReasonUnreachable:
		return pick("is unreachable", "are unreachable")
	case ReasonLost:
		return pick("is lost", "are lost")
	case ReasonNamespaceNotFound:
		return pick("does not have the namespace", "do not have the namespace")
	}
	return string(c)
}

// RejectionCodes lists the rejection codes in summary order.
var RejectionCodes = []ReasonCode{
	ReasonNotFound, ReasonNotJoined, ReasonLeaving, ReasonHeartbeatMissed,
	ReasonAffinityMismatch, ReasonTaintNotTolerated, ReasonTopologySpread, ReasonUnreachable, ReasonLost,
	ReasonNamespaceNotFound,
}
