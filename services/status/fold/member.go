package fold

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Member condition reasons.
const (
	MemberJoinedReason           = "MemberClusterJoined"
	MemberLeftReason             = "MemberClusterLeft"
	MemberHealthyReason          = "MemberClusterHealthy"
	MemberUnhealthyReason        = "MemberClusterUnhealthy"
	MemberHeartbeatPendingReason = "MemberClusterHeartbeatPending"
	MemberHeartbeatMissedReason  = "MemberClusterHeartbeatMissed"

	// MemberAgentType names the member side (the apply worker) in agentStatus.
	MemberAgentType api.AgentType = "MemberAgent"
)

// MissedHeartbeats is how many heartbeat periods may pass without one before
// a member's health is Unknown.
const MissedHeartbeats = 3

// MemberInputs is what a member cluster's status is folded from.
type MemberInputs struct {
	// Member is the member as last joined or updated, defaulted, with its
	// generation and creation time in metadata.
	Member   api.MemberCluster `json:"member"`
	Joined   bool              `json:"joined"`
	JoinedAt time.Time         `json:"joinedAt"`
	LeftAt   time.Time         `json:"leftAt,omitzero"`
	// Heartbeat is the latest heartbeat; HealthSince is when its Healthy
	// value last changed.
	Heartbeat   *events.MemberHeartbeat `json:"heartbeat,omitempty"`
	HealthSince time.Time               `json:"healthSince,omitzero"`
}

// Known reports whether the member has ever joined.
func (m *MemberInputs) Known() bool { return m.Member.Name != "" }

// Upsert records a join (join true) or an update. An update of a member that
// left does not bring it back; an update of an unknown member joins it, as
// the scheduler does.
func (m *MemberInputs) Upsert(mc api.MemberCluster, join bool, now time.Time) bool {
	api.Default(&mc)
	mc.TypeMeta = metav1.TypeMeta{APIVersion: MemberAPIVersion, Kind: MemberKind}
	mc.Status = api.MemberClusterStatus{}
	mc.ResourceVersion, mc.UID, mc.ManagedFields, mc.DeletionTimestamp = "", "", nil, nil
	if mc.Labels == nil {
		mc.Labels = map[string]string{}
	}
	mc.Labels[api.MemberNameLabel] = mc.Name

	known := m.Known()
	switch {
	case !known:
		mc.Generation = 1
		mc.CreationTimestamp = metav1.NewTime(now.UTC())
	case !sameJSON(m.Member.Spec, mc.Spec):
		mc.Generation = m.Member.Generation + 1
		mc.CreationTimestamp = m.Member.CreationTimestamp
	default:
		mc.Generation = m.Member.Generation
		mc.CreationTimestamp = m.Member.CreationTimestamp
	}
	changed := !known || !sameJSON(m.Member, mc)
	m.Member = mc
	if !known || (join && !m.Joined) {
		m.Joined, m.JoinedAt, m.LeftAt = true, now, time.Time{}
		changed = true
	}
	return changed
}

// Leave records that the member left the fleet.
func (m *MemberInputs) Leave(now time.Time) bool {
	if !m.Known() || !m.Joined {
		return false
	}
	m.Joined, m.LeftAt = false, now
	return true
}

// ApplyHeartbeat records a heartbeat of a known member unless a later one is held.
func (m *MemberInputs) ApplyHeartbeat(hb *events.MemberHeartbeat) bool {
	if !m.Known() {
		return false
	}
	old := m.Heartbeat
	if old != nil && hb.ObservedAt.Before(old.ObservedAt) {
		return false
	}
	if old == nil || old.Healthy != hb.Healthy {
		m.HealthSince = hb.ObservedAt
	}
	m.Heartbeat = hb
	return true
}

// Apply records one member event payload and reports whether anything changed.
func (m *MemberInputs) Apply(payload any, now time.Time) bool {
	switch p := payload.(type) {
	case *events.MemberJoined:
		return m.Upsert(p.Member, true, now)
	case *events.MemberUpdated:
		return m.Upsert(p.Member, false, now)
	case *events.MemberLeft:
		return m.Leave(now)
	case *events.MemberHeartbeat:
		return m.ApplyHeartbeat(p)
	}
	return false
}

// Member returns the member cluster with its status as of now: Joined, and
// for a joined member Healthy from its heartbeats (Unknown before the first
// and after MissedHeartbeats periods without one), the reported properties
// and resource usage.
func Member(m *MemberInputs, now time.Time) api.MemberCluster {
	mc := m.Member
	gen := mc.Generation
	cond := func(t api.MemberClusterConditionType, s metav1.ConditionStatus, reason, msg string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: string(t), Status: s, Reason: reason, Message: msg,
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(at.UTC())}
	}
	if !m.Joined {
		mc.Status.Conditions = []metav1.Condition{
			cond(api.ConditionTypeMemberClusterJoined, metav1.ConditionFalse, MemberLeftReason, "The member cluster left the fleet", m.LeftAt),
		}
	} else {
		joined := cond(api.ConditionTypeMemberClusterJoined, metav1.ConditionTrue, MemberJoinedReason, "The member cluster joined the fleet", m.JoinedAt)
		mc.Status.Conditions = []metav1.Condition{joined, health(m, now, cond)}
	}
	if hb := m.Heartbeat; hb != nil {
		mc.Status.Properties = hb.Properties
		mc.Status.ResourceUsage = hb.ResourceUsage
		mc.Status.AgentStatus = []api.AgentStatus{{
			Type:                  MemberAgentType,
			Conditions:            mc.Status.Conditions,
			LastReceivedHeartbeat: metav1.NewTime(hb.ObservedAt.UTC()),
		}}
	}
	return mc
}

func health(m *MemberInputs, now time.Time, cond func(api.MemberClusterConditionType, metav1.ConditionStatus, string, string, time.Time) metav1.Condition) metav1.Condition {
	const t = api.ConditionTypeMemberClusterHealthy
	hb := m.Heartbeat
	if hb == nil {
		return cond(t, metav1.ConditionUnknown, MemberHeartbeatPendingReason, "No heartbeat has been received from the member cluster yet", m.JoinedAt)
	}
	period := time.Duration(m.Member.Spec.HeartbeatPeriodSeconds) * time.Second
	if period <= 0 {
		period = time.Duration(api.DefaultHeartbeatPeriodSeconds) * time.Second
	}
	if deadline := hb.ObservedAt.Add(MissedHeartbeats * period); now.After(deadline) {
		return cond(t, metav1.ConditionUnknown, MemberHeartbeatMissedReason,
			fmt.Sprintf("No heartbeat since %s (%d periods of %s missed)", hb.ObservedAt.UTC().Format(time.RFC3339), MissedHeartbeats, period), deadline)
	}
	if !hb.Healthy {
		msg := hb.Message
		if msg == "" {
			msg = "The member cluster's API server cannot be reached"
		}
		return cond(t, metav1.ConditionFalse, MemberUnhealthyReason, msg, m.HealthSince)
	}
	return cond(t, metav1.ConditionTrue, MemberHealthyReason, "The member cluster is reachable and reporting", m.HealthSince)
}
