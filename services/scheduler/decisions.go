package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// decide schedules one placement (its row is locked by the caller) and
// records the decision when it changed or answers a new generation.
func (s *Scheduler) decide(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow) error {
	policy, err := schedule.CompilePolicy(r.spec.Policy)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", r.name, err))
	}
	policy.Namespace, _ = api.SplitPlacementKey(r.name)
	set, err := s.memberSet()
	if err != nil {
		return err
	}
	prev, prevGeneration, err := s.bindingAndGeneration(ctx, tx, r.name)
	if err != nil {
		return err
	}
	fo, err := s.failoverPolicy(ctx, tx, r, prev)
	if err != nil {
		return err
	}
	fo.HeardUpTo = s.heard
	now := s.now()
	d, wake := schedule.DecideFailover(policy, set, prev, now, fo)
	if prev == nil && !wake.IsZero() && !wake.After(now) {
		// A first decision asks to be decided again at once, with liveness to judge:
		// read it for the clusters just chosen and take the timer that decision sets,
		// here, so that the binding is settled when this transaction commits.
		if fo, err = s.failoverPolicy(ctx, tx, r, d); err != nil {
			return err
		}
		fo.HeardUpTo = s.heard
		_, wake = schedule.DecideFailover(policy, set, d, now, fo)
	}
	id := events.ID("scheduled", r.name, ev.ID())
	if d.Changed(prev) || prevGeneration != r.generation {
		if err := s.record(ctx, tx, ev, r, published{prev, prevGeneration}, d, true); err != nil {
			return err
		}
	}
	return s.afterDecision(ctx, tx, r.name, d, wake, id)
}

// published is the decision consumers hold of a placement: the binding
// before this decision (nil when there is none) and the generation it
// answered.
type published struct {
	decision   *schedule.Decision
	generation int64
}

// record stores a decision as the binding (unless bind is false: the
// placement was deleted) and as history, and enqueues it as the placement's
// next decision revision, in pieces (PlacementScheduledV2). Piece ids derive
// from the consumed event, so a retried handler produces the same events.
func (s *Scheduler) record(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow, prev published, d *schedule.Decision, bind bool) error {
	id := events.ID("scheduled", r.name, ev.ID())
	s.bindings.forget(r.name)
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
	var rev int64
	if err := tx.QueryRow(ctx, `update placements set decision_revision = decision_revision + 1 where name = $1 returning decision_revision`,
		r.name).Scan(&rev); err != nil {
		return fmt.Errorf("count the decisions of %s: %w", r.name, err)
	}
	pieces, err := decisionPieces(r, prev, d, rev, !bind)
	if err != nil {
		return bus.Permanent(fmt.Errorf("decision for %s: %w", r.name, err))
	}
	subject, err := events.SchedulingSubject(r.name)
	if err != nil {
		return bus.Permanent(err)
	}
	for _, p := range pieces {
		pid := id
		if p.Piece > 0 {
			pid = events.ID("scheduled", r.name, ev.ID(), fmt.Sprint(p.Piece))
		}
		e, err := events.New(events.TypePlacementScheduledV2, s.env.Source, r.name, pid, p)
		if err != nil {
			return fmt.Errorf("decision event for %s: %w", r.name, err)
		}
		if err := outbox.Enqueue(ctx, tx, subject, e); err != nil {
			return err
		}
	}
	s.env.Log.Debug("decision published", "placement", r.name, "revision", rev, "base", pieces[0].Base,
		"clusters", len(d.Chosen), "pieces", len(pieces))
	return nil
}

// maxNotSelectedRows bounds the history rows kept for clusters a decision did
// not select: with thousands of members, every decision would otherwise write
// thousands of rows. The binding keeps the full list.
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
	for _, u := range d.Released {
		rows = append(rows, []any{r.name, r.policyGeneration, u.Cluster, "released", nil, nil, u.Note.Message, id, now})
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

// decisionPieces turns a decision into the pieces of its revision rev: a base
// listing every cluster the decision holds (and those it removes) when there
// is no previous decision, the placement was deleted (an empty base) or
// changed generation (a spec edit, which also lets a consumer that lost a
// piece catch up), or the base is no longer than the changes; otherwise the
// clusters whose entry changed since prev.
func decisionPieces(r placementRow, prev published, d *schedule.Decision, rev int64, deleted bool) ([]events.PlacementScheduledV2, error) {
	next := decisionState(d)
	var removed []events.ClusterDecision
	for _, u := range d.Removed {
		if _, held := next[u.Cluster]; !held {
			removed = append(removed, events.ClusterDecision{Cluster: u.Cluster, Action: events.ActionRemoved,
				Reason: events.Truncate(u.Reason.Message, events.MaxMessageBytes)})
		}
	}
	clusters := append(slices.Collect(maps.Values(next)), removed...)
	isBase := true
	switch {
	case deleted:
		clusters = []events.ClusterDecision{}
	case prev.decision == nil || rev == 1 || prev.generation != r.generation:
	default:
		if changes := decisionChanges(decisionState(prev.decision), next, removed); len(changes) < len(clusters) {
			clusters, isBase = changes, false
		}
	}
	slices.SortFunc(clusters, func(a, b events.ClusterDecision) int { return strings.Compare(a.Cluster, b.Cluster) })

	h := events.PlacementScheduledV2{
		Placement: r.name, Revision: rev, Base: isBase, Generation: r.generation, PlacementType: api.PlacementType(d.Type),
		Wanted: d.Needed, ChosenCount: len(d.Chosen), Fulfilled: d.Fulfilled,
	}
	switch {
	case deleted:
		h.ChosenCount, h.Fulfilled, h.Message = 0, false, "the placement was deleted"
	case !d.Fulfilled:
		h.Message = events.Truncate(d.UnfulfilledMessage(), events.MaxMessageBytes)
	}
	if d.Type == framework.PickAll {
		h.Wanted = 0
	}
	return revision.Cut(h, clusters, func(p *events.PlacementScheduledV2, piece, pieces int, cs []events.ClusterDecision) {
		p.Piece, p.Pieces, p.Clusters = piece, pieces, cs
	})
}

// decisionState is what a consumer holds of a decision, by cluster: the
// chosen clusters with their scores, and, when the policy wants more
// clusters than were found, as many not-chosen ones (the first by name) with
// why. The reason of a chosen cluster is its scores, in Fleet's words, so it
// is left out.
func decisionState(d *schedule.Decision) map[string]events.ClusterDecision {
	st := make(map[string]events.ClusterDecision, len(d.Chosen)+len(d.Released))
	for _, c := range d.Chosen {
		cd := events.ClusterDecision{Cluster: c.Cluster, Action: events.DecisionAction(c.Action),
			AffinityScore: c.Scores.Affinity, TopologySpreadScore: c.Scores.TopologySpread}
		if c.Failover != nil {
			cd.FailoverReason, cd.FailoverMessage = c.Failover.Reason, events.Truncate(c.Failover.Message, events.MaxMessageBytes)
		}
		st[c.Cluster] = cd
	}
	for _, r := range d.Released {
		action := events.ActionReleased
		if r.Lost {
			action = events.ActionLost
		}
		msg := events.Truncate(r.Note.Message, events.MaxMessageBytes)
		st[r.Cluster] = events.ClusterDecision{Cluster: r.Cluster, Action: action, Reason: msg,
			FailoverReason: r.Note.Reason, FailoverMessage: msg}
	}
	if d.Type != framework.PickAll {
		missing := min(max(d.Needed-len(d.Chosen), 0), len(d.NotChosen))
		for _, u := range d.NotChosen[:missing] {
			st[u.Cluster] = events.ClusterDecision{Cluster: u.Cluster, Reason: events.Truncate(u.Reason.Message, events.MaxMessageBytes)}
		}
	}
	return st
}

// decisionChanges lists the entries of next that are new or differ from prev
// (a chosen cluster kept with the same scores is no change), the removed
// clusters, and a removal of each other cluster prev held and next does not
// (a not-chosen one no longer shown).
func decisionChanges(prev, next map[string]events.ClusterDecision, removed []events.ClusterDecision) []events.ClusterDecision {
	chosen := func(c events.ClusterDecision) bool {
		return c.Action == events.ActionAdded || c.Action == events.ActionKept
	}
	var out []events.ClusterDecision
	for name, c := range next {
		p, ok := prev[name]
		released := func(c events.ClusterDecision) bool {
			return c.Action == events.ActionLost || c.Action == events.ActionReleased
		}
		if !ok || chosen(p) != chosen(c) || p.AffinityScore != c.AffinityScore || p.TopologySpreadScore != c.TopologySpreadScore || p.Reason != c.Reason ||
			((released(p) || released(c)) && p.Action != c.Action) || p.FailoverReason != c.FailoverReason || p.FailoverMessage != c.FailoverMessage {
			out = append(out, c)
		}
	}
	gone := map[string]bool{}
	for _, c := range removed {
		gone[c.Cluster] = true
		out = append(out, c)
	}
	for name := range prev {
		if _, ok := next[name]; !ok && !gone[name] {
			out = append(out, events.ClusterDecision{Cluster: name, Action: events.ActionRemoved})
		}
	}
	return out
}
