package fold

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// FailedOverMessage and FailedBackMessage end the message of a cluster the
// placement moved to once it is available there.
const (
	FailedOverMessage = "; the placement is available on it"
	FailedBackMessage = "; the placement is available on it again"
)

// failover adds the cluster's Failover condition when the scheduler's failover
// did something on it. A replacement (or the original cluster of a failback) is
// in progress (Unknown) until the placement is available on it, then done (True);
// a lost cluster is False.
func (cf *clusterFold) failover(c events.ClusterDecision) {
	if c.FailoverReason == "" {
		return
	}
	status, reason, msg := failoverStatus(c)
	if status == metav1.ConditionUnknown && cf.available() {
		switch reason {
		case api.FailoverReplacementScheduledReason:
			status, reason, msg = metav1.ConditionTrue, api.FailedOverReason, msg+FailedOverMessage
		case api.FailbackScheduledReason:
			status, reason, msg = metav1.ConditionTrue, api.FailedBackReason, msg+FailedBackMessage
		}
	}
	cf.add(api.FailoverConditionType, status, reason, msg)
}

// available reports whether the cluster's Available condition is True.
func (cf *clusterFold) available() bool {
	for _, c := range cf.rps.Conditions {
		if c.Type == string(api.PerClusterAvailableConditionType) {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// failoverStatus is the Failover condition a decision entry says.
func failoverStatus(c events.ClusterDecision) (metav1.ConditionStatus, string, string) {
	switch c.FailoverReason {
	case api.ClusterLostReason, api.NoFailoverReplacementReason:
		return metav1.ConditionFalse, c.FailoverReason, c.FailoverMessage
	}
	return metav1.ConditionUnknown, c.FailoverReason, c.FailoverMessage
}

// released is the entry of a cluster failover or failback moved the placement
// away from while it still may hold a copy: its Failover condition only.
func (f *folder) released(c events.ClusterDecision, prev *api.ResourcePlacementStatus) api.ResourcePlacementStatus {
	cf := &clusterFold{folder: f, prev: prev, rps: api.ResourcePlacementStatus{ClusterName: c.Cluster}}
	status, reason, msg := failoverStatus(c)
	cf.add(api.FailoverConditionType, status, reason, msg)
	return cf.rps
}
