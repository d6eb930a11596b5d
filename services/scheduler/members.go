package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// member is what the scheduler knows of one member cluster.
type member struct {
	mc       api.MemberCluster
	joined   bool
	joinedAt time.Time
	// heartbeat is when the bus received the member's latest heartbeat.
	heartbeat time.Time
	// seq is the stream sequence of the latest member event taken (joined,
	// updated, left, heartbeat: one subject, so one order).
	seq int64
	// unreachable: the latest heartbeat said the member's API server could not be
	// reached. (Failover reads liveness from PostgreSQL, not from here.)
	unreachable bool
}

// load reads the members from PostgreSQL.
func (s *Scheduler) load(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return pgx.BeginFunc(ctx, s.env.Pool, func(tx pgx.Tx) error { return s.syncMembers(ctx, tx, false) })
}

// syncMembers reloads the members when another replica (or a rolled-back
// transaction) changed them since this one last looked. It locks the fleet
// version row until commit: shared for a placement decision, exclusive for a
// member change. So a decision never uses a member set that a concurrent
// member change is about to replace, and that change's re-decision of every
// placement sees placements committed before it.
func (s *Scheduler) syncMembers(ctx context.Context, tx pgx.Tx, exclusive bool) error {
	lock := "share"
	if exclusive {
		lock = "update"
	}
	var version int64
	if err := tx.QueryRow(ctx, `select version from fleet_version for `+lock).Scan(&version); err != nil {
		return fmt.Errorf("read fleet version: %w", err)
	}
	if version == s.fleetVersion {
		return nil
	}
	rows, err := tx.Query(ctx, `select name, spec, state = 'joined', joined_at, heartbeat_at, event_seq, not healthy from member_clusters`)
	if err != nil {
		return fmt.Errorf("load members: %w", err)
	}
	members := map[string]*member{}
	for rows.Next() {
		var (
			name string
			spec []byte
			m    member
			hb   *time.Time
		)
		if err := rows.Scan(&name, &spec, &m.joined, &m.joinedAt, &hb, &m.seq, &m.unreachable); err != nil {
			return fmt.Errorf("load members: %w", err)
		}
		if err := json.Unmarshal(spec, &m.mc); err != nil {
			return fmt.Errorf("load member %s: %w", name, err)
		}
		if hb != nil {
			m.heartbeat = *hb
		}
		members[name] = &m
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load members: %w", err)
	}
	s.members, s.set, s.fleetVersion = members, nil, version
	return nil
}

// bumpFleet records a change to the member set that matters to scheduling.
func (s *Scheduler) bumpFleet(ctx context.Context, tx pgx.Tx) error {
	err := tx.QueryRow(ctx, `update fleet_version set version = version + 1 returning version`).Scan(&s.fleetVersion)
	if err != nil {
		return fmt.Errorf("bump fleet version: %w", err)
	}
	return nil
}

// memberSet builds the scheduler's view of the members after a reload.
func (s *Scheduler) memberSet() (*framework.MemberSet, error) {
	if s.set != nil {
		return s.set, nil
	}
	list := make([]*framework.Member, 0, len(s.members))
	for _, m := range s.members {
		fm, err := m.framework()
		if err != nil {
			return nil, err
		}
		list = append(list, fm)
	}
	s.set = framework.NewMemberSet(list...)
	return s.set, nil
}

// refresh puts one changed member into the built member set, which is cheap
// compared with rebuilding the set of thousands. A new member re-indexes the whole
// set, so it drops the set instead, to be built once when next needed: a wave of joins
// then costs one rebuild, not one per join.
func (s *Scheduler) refresh(m *member) error {
	s.members[m.mc.Name] = m
	if s.set == nil {
		return nil
	}
	if _, ok := s.set.Get(m.mc.Name); !ok {
		s.set = nil
		return nil
	}
	fm, err := m.framework()
	if err != nil {
		return err
	}
	s.set = s.set.With(fm)
	return nil
}

// framework converts a member for the scheduling plugins.
func (m *member) framework() (*framework.Member, error) {
	spec := schedule.MemberSpecFrom(&m.mc)
	spec.Joined = m.joined
	spec.Unreachable = m.unreachable
	// Joining is a sign of life: a member counts as heard from when it joins.
	spec.LastHeartbeat = m.heartbeat
	if m.joinedAt.After(spec.LastHeartbeat) {
		spec.LastHeartbeat = m.joinedAt
	}
	fm, err := framework.NewMember(spec)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.mc.Name, err)
	}
	return fm, nil
}

// late reports whether a member event with stream sequence seq is older than the
// latest one taken about the member, and logs it.
func (s *Scheduler) late(m *member, name string, seq int64) bool {
	if m == nil || seq > m.seq {
		return false
	}
	s.env.Log.Debug("older member event delivered late; ignored", "cluster", name, "sequence", seq, "held", m.seq)
	return true
}

func (s *Scheduler) upsertMember(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, mc *api.MemberCluster, join bool) error {
	api.Default(mc)
	if errs := api.ValidateMemberCluster(mc); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("member %s: %w", mc.Name, errs))
	}
	prev := s.members[mc.Name]
	if s.late(prev, mc.Name, seq) {
		return nil
	}
	if prev != nil {
		// Properties come from heartbeats; an update of labels keeps them.
		mc.Status = prev.mc.Status
	}
	spec, _ := json.Marshal(mc)
	labels, _ := json.Marshal(mc.Labels)
	taints, _ := json.Marshal(mc.Spec.Taints)
	state := "joined"
	if !join && prev != nil && !prev.joined {
		state = "left" // an update does not bring a departed member back
	}
	var joinedAt time.Time
	err := tx.QueryRow(ctx, `
		insert into member_clusters (name, spec, labels, taints, state, event_seq)
		values ($1, $2, $3, $4, $5, $6)
		on conflict (name) do update set spec = excluded.spec, labels = excluded.labels,
			taints = excluded.taints, state = excluded.state,
			joined_at = case when member_clusters.state = 'left' and excluded.state = 'joined' then now() else member_clusters.joined_at end,
			left_at = case when excluded.state = 'joined' then null else member_clusters.left_at end,
			event_seq = excluded.event_seq, updated_at = now()
		where member_clusters.event_seq < excluded.event_seq
		returning joined_at`, mc.Name, spec, labels, taints, state, seq).Scan(&joinedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // a newer event about the member was taken first (by another replica)
	}
	if err != nil {
		return fmt.Errorf("store member %s: %w", mc.Name, err)
	}
	m := &member{mc: *mc, joined: state == "joined", joinedAt: joinedAt, seq: seq}
	if prev != nil {
		m.heartbeat, m.unreachable = prev.heartbeat, prev.unreachable
	}
	if err := s.refresh(m); err != nil {
		return bus.Permanent(err)
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return err
	}
	s.rescheduleLater(ctx, ev)
	return nil
}

func (s *Scheduler) leaveMember(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, name string) error {
	m := s.members[name]
	if m == nil || !m.joined || s.late(m, name, seq) {
		return nil
	}
	tag, err := tx.Exec(ctx, `update member_clusters set state = 'left', left_at = now(), event_seq = $2, updated_at = now()
		where name = $1 and event_seq < $2`, name, seq)
	if err != nil {
		return fmt.Errorf("store member %s leaving: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	left := *m
	left.joined, left.seq = false, seq
	if err := s.refresh(&left); err != nil {
		return err
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return err
	}
	s.rescheduleLater(ctx, ev)
	return nil
}

// receivedAt is when the bus received a message: the JetStream message's time, but
// never later than the scheduler's clock (the server's clock may run ahead of it).
func (s *Scheduler) receivedAt(m bus.Meta) time.Time {
	now := s.now()
	if m.Time.IsZero() || m.Time.After(now) {
		return now
	}
	return m.Time
}

// heartbeat records a member's properties and liveness. Liveness is when the bus
// received the heartbeat, never the time the member claims (observedAt): a member
// whose clock runs ahead, or that lies, cannot look alive after it stops beating. It
// reschedules only when something a decision depends on changed: the properties, or
// the member coming back after missed heartbeats.
func (s *Scheduler) heartbeat(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, receivedAt time.Time, hb *events.MemberHeartbeat) (bool, error) {
	m := s.members[hb.Name]
	if m == nil {
		s.env.Log.Warn("heartbeat from a cluster that has not joined; ignored", "cluster", hb.Name)
		return false, nil
	}
	if s.late(m, hb.Name, seq) {
		return false, nil
	}
	now := s.now()
	period := time.Duration(m.mc.Spec.HeartbeatPeriodSeconds) * time.Second
	wasStale := m.heartbeat.IsZero() || now.Sub(m.heartbeat) > framework.MissedHeartbeats*period
	status := m.mc.Status
	status.Properties = hb.Properties
	status.ResourceUsage = hb.ResourceUsage
	status.Namespaces = hb.Namespaces
	oldProps, _ := json.Marshal(schedule.MemberSpecFrom(&m.mc).Properties)
	next := m.mc
	next.Status = status
	newProps, _ := json.Marshal(schedule.MemberSpecFrom(&next).Properties)
	// Health changes when the heartbeat says otherwise than the last, or when it
	// ends a silence long enough to count as down (see schedule.Liveness).
	silenceEnded := !m.heartbeat.IsZero() && receivedAt.Sub(m.heartbeat) > time.Duration(schedule.SilentPeriods*float64(period))
	healthChanged := hb.Healthy == m.unreachable || (hb.Healthy && silenceEnded)
	// A namespace that appears or goes matters to the ResourcePlacements of
	// that namespace; the owners of namespaces do not matter to scheduling.
	namespacesChanged := (m.mc.Status.Namespaces == nil) != (hb.Namespaces == nil) ||
		!maps.EqualFunc(m.mc.Status.Namespaces, hb.Namespaces, func(string, string) bool { return true })
	changed := string(oldProps) != string(newProps) || (wasStale && !m.heartbeat.IsZero()) || healthChanged || namespacesChanged

	spec, _ := json.Marshal(next)
	props, _ := json.Marshal(hb.Properties)
	tag, err := tx.Exec(ctx, `update member_clusters set spec = $2, properties = $3, heartbeat_at = $4, event_seq = $5, updated_at = now(),
			healthy = $6, health_message = $7,
			health_since = case when $8 or health_since is null then $4 else health_since end
		where name = $1 and event_seq < $5`, hb.Name, spec, props, receivedAt, seq, hb.Healthy, events.Truncate(hb.Message, events.MaxMessageBytes), healthChanged)
	if err != nil {
		return false, fmt.Errorf("store heartbeat of %s: %w", hb.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // a newer event about the member was taken first (by another replica)
	}
	beat := *m
	beat.mc, beat.heartbeat, beat.seq, beat.unreachable = next, receivedAt, seq, !hb.Healthy
	if err := s.refresh(&beat); err != nil {
		return false, bus.Permanent(err)
	}
	if !changed {
		return false, nil
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return true, err
	}
	s.rescheduleLater(ctx, ev)
	return true, nil
}
