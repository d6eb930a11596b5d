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
	// Heartbeat is the latest heartbeat; HeartbeatAt is when the bus received
	// it, what liveness is judged by (never its observedAt, which the member
	// claims); HealthSince is when its Healthy value last changed.
	Heartbeat   *events.MemberHeartbeat `json:"heartbeat,omitempty"`
	HeartbeatAt time.Time               `json:"heartbeatAt,omitzero"`
	HealthSince time.Time               `json:"healthSince,omitzero"`
	// Seq is the stream sequence of the latest member event taken (joined,
	// updated, left and heartbeats share the member's subject, so one order).
	Seq int64 `json:"seq,omitempty"`
}

// Known reports whether the member has ever joined.
func (m *MemberInputs) Known() bool { return m.Member.Name != "" }

// Upsert records a join (join true) or an update. An update of a member that
// left does not bring it back; an update of an unknown member joins it, as
// the scheduler does.
func (m *MemberInputs) Upsert(mc api.MemberCluster, join bool, now time.Time) bool {
	api.Default(&mc)
	// The version the user wrote (v1beta1 or v1) is the one shown.
	version := mc.APIVersion
	if !api.IsFleetAPIVersion(version, api.ClusterGroupVersion.Group) {
		version = MemberAPIVersion
	}
	mc.TypeMeta = metav1.TypeMeta{APIVersion: version, Kind: MemberKind}
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

// ApplyHeartbeat records a heartbeat of a known member, received by the bus at
// received, unless one received later is held.
func (m *MemberInputs) ApplyHeartbeat(hb *events.MemberHeartbeat, received time.Time) bool {
	if !m.Known() {
		return false
	}
	old := m.Heartbeat
	if old != nil && received.Before(m.HeartbeatAt) {
		return false
	}
	if old == nil || old.Healthy != hb.Healthy {
		m.HealthSince = received
	}
	m.Heartbeat, m.HeartbeatAt = hb, received
	return true
}

// Apply records one member event payload with stream sequence seq and reports
// whether anything changed. An event no newer than the latest taken (a
// redelivery after a failed attempt) changes nothing: late events lose. now
// stamps a join or a leave; for a heartbeat it must be when the bus received
// it. An event taken records its sequence even when nothing else changed, so
// that every service skips the same late events.
func (m *MemberInputs) Apply(payload any, seq int64, now time.Time) bool {
	if seq <= m.Seq {
		return false
	}
	var taken bool
	switch p := payload.(type) {
	case *events.MemberJoined:
		m.Upsert(p.Member, true, now)
		taken = true
	case *events.MemberUpdated:
		m.Upsert(p.Member, false, now)
		taken = true
	case *events.MemberLeft:
		taken = m.Leave(now)
	case *events.MemberHeartbeat:
		taken = m.ApplyHeartbeat(p, now)
	}
	if taken {
		m.Seq = seq
	}
	return taken
}

// lastHeartbeat is when the bus received the latest heartbeat; for inputs
// stored before receive times were kept, the time the heartbeat claimed (the
// next heartbeat replaces it).
func (m *MemberInputs) lastHeartbeat() time.Time {
	if m.HeartbeatAt.IsZero() {
		return m.Heartbeat.ObservedAt
	}
	return m.HeartbeatAt
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
		mc.Status.Namespaces = hb.Namespaces
		mc.Status.AgentStatus = []api.AgentStatus{{
			Type:                  MemberAgentType,
			Conditions:            mc.Status.Conditions,
			LastReceivedHeartbeat: metav1.NewTime(m.lastHeartbeat().UTC()),
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
	last := m.lastHeartbeat()
	if deadline := last.Add(MissedHeartbeats * period); now.After(deadline) {
		return cond(t, metav1.ConditionUnknown, MemberHeartbeatMissedReason,
			fmt.Sprintf("No heartbeat since %s (%d periods of %s missed)", last.UTC().Format(time.RFC3339), MissedHeartbeats, period), deadline)
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
