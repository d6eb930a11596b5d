package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// Scheduler holds the member set in memory; placements and their current
// decisions are read under the placement's row lock, so replicas sharing the
// consumer never decide one placement concurrently.
type Scheduler struct {
	env *service.Env
	now func() time.Time

	mu           sync.Mutex
	members      map[string]*member
	set          *framework.MemberSet // nil when members changed since it was built
	fleetVersion int64                // -1: reload before use
}

// member is what the scheduler knows of one member cluster.
type member struct {
	mc        api.MemberCluster
	joined    bool
	joinedAt  time.Time
	heartbeat time.Time
}

func newScheduler(env *service.Env, now func() time.Time) *Scheduler {
	if now == nil {
		now = time.Now
	}
	return &Scheduler{env: env, now: now, members: map[string]*member{}, fleetVersion: -1}
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
	rows, err := tx.Query(ctx, `select name, spec, state = 'joined', joined_at, heartbeat_at from member_clusters`)
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
		if err := rows.Scan(&name, &spec, &m.joined, &m.joinedAt, &hb); err != nil {
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
// compared with rebuilding the set of thousands.
func (s *Scheduler) refresh(m *member) error {
	s.members[m.mc.Name] = m
	if s.set == nil {
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

func (s *Scheduler) upsertMember(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, mc *api.MemberCluster, join bool) error {
	api.Default(mc)
	if errs := api.ValidateMemberCluster(mc); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("member %s: %w", mc.Name, errs))
	}
	prev := s.members[mc.Name]
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
		insert into member_clusters (name, spec, labels, taints, state)
		values ($1, $2, $3, $4, $5)
		on conflict (name) do update set spec = excluded.spec, labels = excluded.labels,
			taints = excluded.taints, state = excluded.state,
			joined_at = case when member_clusters.state = 'left' and excluded.state = 'joined' then now() else member_clusters.joined_at end,
			left_at = case when excluded.state = 'joined' then null else member_clusters.left_at end,
			updated_at = now()
		returning joined_at`, mc.Name, spec, labels, taints, state).Scan(&joinedAt)
	if err != nil {
		return fmt.Errorf("store member %s: %w", mc.Name, err)
	}
	m := &member{mc: *mc, joined: state == "joined", joinedAt: joinedAt}
	if prev != nil {
		m.heartbeat = prev.heartbeat
	}
	if err := s.refresh(m); err != nil {
		return bus.Permanent(err)
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return err
	}
	return s.rescheduleAll(ctx, tx, ev)
}

func (s *Scheduler) leaveMember(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string) error {
	m := s.members[name]
	if m == nil || !m.joined {
		return nil
	}
	if _, err := tx.Exec(ctx, `update member_clusters set state = 'left', left_at = now(), updated_at = now() where name = $1`, name); err != nil {
		return fmt.Errorf("store member %s leaving: %w", name, err)
	}
	left := *m
	left.joined = false
	if err := s.refresh(&left); err != nil {
		return err
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return err
	}
	return s.rescheduleAll(ctx, tx, ev)
}

// heartbeat records a member's properties and liveness. It reschedules only
// when something a decision depends on changed: the properties, or the member
// coming back after missed heartbeats.
func (s *Scheduler) heartbeat(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, hb *events.MemberHeartbeat) (bool, error) {
	m := s.members[hb.Name]
	if m == nil {
		s.env.Log.Warn("heartbeat from a cluster that has not joined; ignored", "cluster", hb.Name)
		return false, nil
	}
	now := s.now()
	period := time.Duration(m.mc.Spec.HeartbeatPeriodSeconds) * time.Second
	wasStale := m.heartbeat.IsZero() || now.Sub(m.heartbeat) > framework.MissedHeartbeats*period
	status := m.mc.Status
	status.Properties = hb.Properties
	status.ResourceUsage = hb.ResourceUsage
	oldProps, _ := json.Marshal(schedule.MemberSpecFrom(&m.mc).Properties)
	next := m.mc
	next.Status = status
	newProps, _ := json.Marshal(schedule.MemberSpecFrom(&next).Properties)
	changed := string(oldProps) != string(newProps) || (wasStale && !m.heartbeat.IsZero())

	spec, _ := json.Marshal(next)
	props, _ := json.Marshal(hb.Properties)
	if _, err := tx.Exec(ctx, `update member_clusters set spec = $2, properties = $3, heartbeat_at = $4, updated_at = now() where name = $1`,
		hb.Name, spec, props, hb.ObservedAt); err != nil {
		return false, fmt.Errorf("store heartbeat of %s: %w", hb.Name, err)
	}
	beat := *m
	beat.mc, beat.heartbeat = next, hb.ObservedAt
	if err := s.refresh(&beat); err != nil {
		return false, bus.Permanent(err)
	}
	if !changed {
		return false, nil
	}
	if err := s.bumpFleet(ctx, tx); err != nil {
		return true, err
	}
	return true, s.rescheduleAll(ctx, tx, ev)
}

// placementRow is a placement as stored.
type placementRow struct {
	name             string
	spec             api.PlacementSpec
	generation       int64
	policyGeneration int64
}

func (s *Scheduler) upsertPlacement(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, p *events.PlacementUpserted) error {
	crp := p.Placement
	api.SetDefaults(&crp)
	if errs := api.ValidatePlacement(&crp); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, errs))
	}
	var oldType *string
	_ = tx.QueryRow(ctx, `select spec->'policy'->>'placementType' from placements where name = $1 and not deleted`, crp.Name).Scan(&oldType)
	if oldType != nil && *oldType != string(crp.Spec.EffectivePlacementType()) {
		return bus.Permanent(fmt.Errorf("placement %s: spec.policy.placementType: is immutable (was %s, now %s)",
			crp.Name, *oldType, crp.Spec.EffectivePlacementType()))
	}
	spec, err := json.Marshal(crp.Spec)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, err))
	}
	row := placementRow{name: crp.Name, spec: crp.Spec}
	// The upsert holds the placement's row lock until commit: decisions for
	// one placement are serialised across replicas.
	err = tx.QueryRow(ctx, `
		insert into placements (name, spec) values ($1, $2)
		on conflict (name) do update set
			spec = excluded.spec,
			generation = placements.generation + case when placements.spec = excluded.spec and not placements.deleted then 0 else 1 end,
			policy_generation = placements.policy_generation + case when placements.spec->'policy' is distinct from excluded.spec->'policy' or placements.deleted then 1 else 0 end,
			deleted = false, deleted_at = null, updated_at = now()
		returning generation, policy_generation`, crp.Name, spec).Scan(&row.generation, &row.policyGeneration)
	if err != nil {
		return fmt.Errorf("store placement %s: %w", crp.Name, err)
	}
	return s.decide(ctx, tx, ev, row)
}

func (s *Scheduler) deletePlacement(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string) error {
	var generation, policyGeneration int64
	err := tx.QueryRow(ctx, `update placements set deleted = true, deleted_at = now(), updated_at = now()
		where name = $1 and not deleted returning generation, policy_generation`, name).Scan(&generation, &policyGeneration)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete placement %s: %w", name, err)
	}
	prev, err := s.binding(ctx, tx, name)
	if err != nil || prev == nil {
		return err
	}
	d := &schedule.Decision{PolicyKey: prev.PolicyKey, Type: prev.Type}
	for _, c := range prev.Chosen {
		d.Removed = append(d.Removed, schedule.Unchosen{Cluster: c.Cluster,
			Reason: framework.Reason{Code: "PlacementDeleted", Message: "the placement was deleted"}})
	}
	if _, err := tx.Exec(ctx, `delete from scheduler_bindings where placement = $1`, name); err != nil {
		return fmt.Errorf("delete binding of %s: %w", name, err)
	}
	return s.record(ctx, tx, ev, placementRow{name: name, generation: generation, policyGeneration: policyGeneration}, d, false)
}

// rescheduleAll re-decides every placement after a change to the members.
// Rows are locked in name order, so concurrent replicas cannot deadlock.
func (s *Scheduler) rescheduleAll(ctx context.Context, tx pgx.Tx, ev cloudevents.Event) error {
	rows, err := tx.Query(ctx, `select name, spec, generation, policy_generation from placements
		where not deleted order by name for update`)
	if err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	var list []placementRow
	for rows.Next() {
		var r placementRow
		var spec []byte
		if err := rows.Scan(&r.name, &spec, &r.generation, &r.policyGeneration); err != nil {
			return fmt.Errorf("list placements: %w", err)
		}
		if err := json.Unmarshal(spec, &r.spec); err != nil {
			return fmt.Errorf("placement %s: %w", r.name, err)
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	for _, r := range list {
		if err := s.decide(ctx, tx, ev, r); err != nil {
			return err
		}
	}
	return nil
}

// binding reads a placement's current decision.
func (s *Scheduler) binding(ctx context.Context, tx pgx.Tx, name string) (*schedule.Decision, error) {
	var raw []byte
	err := tx.QueryRow(ctx, `select decision from scheduler_bindings where placement = $1`, name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read binding of %s: %w", name, err)
	}
	var d schedule.Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("read binding of %s: %w", name, err)
	}
	return &d, nil
}

// decide schedules one placement (its row is locked by the caller) and
// records the decision when it changed or answers a new generation.
func (s *Scheduler) decide(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow) error {
	policy, err := schedule.CompilePolicy(r.spec.Policy)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", r.name, err))
	}
	set, err := s.memberSet()
	if err != nil {
		return err
	}
	prev, err := s.binding(ctx, tx, r.name)
	if err != nil {
		return err
	}
	var prevGeneration int64
	if prev != nil {
		_ = tx.QueryRow(ctx, `select generation from scheduler_bindings where placement = $1`, r.name).Scan(&prevGeneration)
	}
	d := schedule.Decide(policy, set, prev, s.now())
	if !d.Changed(prev) && prevGeneration == r.generation {
		return nil
	}
	return s.record(ctx, tx, ev, r, d, true)
}

// record stores a decision as the binding and as history, and enqueues the
// PlacementScheduled event, whose id derives from the consumed event so a
// retried handler produces the same event.
func (s *Scheduler) record(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow, d *schedule.Decision, bind bool) error {
	id := events.ID("scheduled", r.name, ev.ID())
	if bind {
		raw, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode decision: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			insert into scheduler_bindings (placement, generation, policy_generation, policy_key, decision, event_id)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (placement) do update set generation = excluded.generation,
				policy_generation = excluded.policy_generation, policy_key = excluded.policy_key,
				decision = excluded.decision, event_id = excluded.event_id, updated_at = now()`,
			r.name, r.generation, r.policyGeneration, d.PolicyKey, raw, id); err != nil {
			return fmt.Errorf("store binding of %s: %w", r.name, err)
		}
	}
	if err := s.history(ctx, tx, r, d, id); err != nil {
		return err
	}
	out := scheduledEvent(r, d)
	subject, err := events.SchedulingSubject(r.name)
	if err != nil {
		return bus.Permanent(err)
	}
	e, err := events.New(events.TypePlacementScheduled, s.env.Source, r.name, id, out)
	if err != nil {
		return fmt.Errorf("decision event for %s: %w", r.name, err)
	}
	return outbox.Enqueue(ctx, tx, subject, e)
}

// maxNotSelectedRows bounds the history rows kept for clusters a decision did
// not select: with thousands of members, every decision would otherwise write
// thousands of rows. The decision event and binding keep the full list.
const maxNotSelectedRows = 100

func (s *Scheduler) history(ctx context.Context, tx pgx.Tx, r placementRow, d *schedule.Decision, id string) error {
	var rows [][]any
	now := s.now()
	for _, c := range d.Chosen {
		rows = append(rows, []any{r.name, r.policyGeneration, c.Cluster, string(c.Action),
			c.Scores.Affinity, c.Scores.TopologySpread, c.Message(), id, now})
	}
	for _, u := range d.Removed {
		rows = append(rows, []any{r.name, r.policyGeneration, u.Cluster, "removed", nil, nil, u.Reason.Message, id, now})
	}
	for i, u := range d.NotChosen {
		if i == maxNotSelectedRows {
			break
		}
		rows = append(rows, []any{r.name, r.policyGeneration, u.Cluster, "not-selected", nil, nil, u.Reason.Message, id, now})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"scheduling_decisions"},
		[]string{"placement", "policy_generation", "cluster", "action", "affinity_score", "topology_spread_score", "reason", "event_id", "decided_at"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("store decision history of %s: %w", r.name, err)
	}
	return nil
}

// scheduledEvent turns a decision into its event payload.
func scheduledEvent(r placementRow, d *schedule.Decision) events.PlacementScheduled {
	out := events.PlacementScheduled{
		Placement: r.name, Generation: r.generation, PlacementType: api.PlacementType(d.Type),
		Wanted: d.Needed, Fulfilled: d.Fulfilled, Chosen: []events.ClusterDecision{},
	}
	if d.Type == framework.PickAll {
		out.Wanted = 0
	}
	for _, c := range d.Chosen {
		out.Chosen = append(out.Chosen, events.ClusterDecision{Cluster: c.Cluster, Action: events.DecisionAction(c.Action),
			AffinityScore: c.Scores.Affinity, TopologySpreadScore: c.Scores.TopologySpread, Reason: c.Message()})
	}
	for _, u := range d.Removed {
		out.Removed = append(out.Removed, events.ClusterDecision{Cluster: u.Cluster, Action: events.ActionRemoved, Reason: u.Reason.Message})
	}
	for _, u := range d.NotChosen {
		out.NotChosen = append(out.NotChosen, events.ClusterDecision{Cluster: u.Cluster, Reason: u.Reason.Message})
	}
	if !d.Fulfilled {
		out.Message = d.UnfulfilledMessage()
	}
	return out
}
