package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// servePreviews answers scheduling previews (events.PreviewSchedulingSubject)
// until ctx ends: the decision the scheduler would make for a placement now,
// with the same policy code against the same member set, recording nothing.
func (s *Scheduler) servePreviews(ctx context.Context) error {
	return reply.Serve(ctx, s.env.NC, events.PreviewSchedulingSubject, "scheduler", s.env.Log, nil,
		func(ctx context.Context, m *nats.Msg, w io.Writer) error {
			var req events.SchedulingPreviewRequest
			if err := json.Unmarshal(m.Data, &req); err != nil {
				return fmt.Errorf("preview request: %w", err)
			}
			p, err := s.preview(ctx, &req)
			if err != nil {
				return err
			}
			return json.NewEncoder(w).Encode(events.QueryReply[*events.SchedulingPreview]{Result: p})
		})
}

// preview decides req's placement as decide would, from its current binding
// (scheduling is sticky), in a read-only transaction.
func (s *Scheduler) preview(ctx context.Context, req *events.SchedulingPreviewRequest) (*events.SchedulingPreview, error) {
	crp := &req.Placement
	if crp.Name == "" {
		return nil, fmt.Errorf("preview: placement.metadata.name is required")
	}
	policy, err := schedule.CompilePolicy(crp.Spec.Policy)
	if err != nil {
		return nil, fmt.Errorf("placement %s: %w", crp.Name, err)
	}
	policy.Namespace, _ = api.SplitPlacementKey(api.InternalPlacement(crp).Name)
	s.mu.Lock()
	set, err := s.memberSet()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var prev *schedule.Decision
	err = pgx.BeginTxFunc(ctx, s.env.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		prev, err = s.binding(ctx, tx, crp.Name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return previewOf(crp.Name, schedule.Decide(policy, set, prev, s.now())), nil
}

// previewOf is a decision as the preview shows it.
func previewOf(name string, d *schedule.Decision) *events.SchedulingPreview {
	fulfilled, reason, message := d.Condition()
	p := &events.SchedulingPreview{Placement: name, Fulfilled: fulfilled, Reason: reason, Message: message,
		Chosen: make([]events.PreviewChosen, 0, len(d.Chosen))}
	for _, c := range d.Chosen {
		p.Chosen = append(p.Chosen, events.PreviewChosen{Cluster: c.Cluster, Action: string(c.Action),
			AffinityScore: c.Scores.Affinity, TopologySpreadScore: c.Scores.TopologySpread})
	}
	for _, u := range d.NotChosen {
		p.NotChosen = append(p.NotChosen, events.PreviewNotChosen{Cluster: u.Cluster, Reason: string(u.Reason.Code), Message: u.Reason.Message})
	}
	for _, u := range d.Removed {
		p.Removed = append(p.Removed, events.PreviewNotChosen{Cluster: u.Cluster, Reason: string(u.Reason.Code), Message: u.Reason.Message})
	}
	return p
}
