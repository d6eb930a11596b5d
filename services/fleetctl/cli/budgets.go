package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// checkBudgets judges every disruption budget the items apply against its
// placement, as upstream's webhook does (api.ValidateDisruptionBudgetForPlacement:
// a PickAll placement takes only an integer minAvailable). The placement is the
// one applied alongside, else the live one; a budget for a placement that does
// not exist yet passes (the eviction then refuses a misconfigured budget with
// upstream's message).
func (a *app) checkBudgets(ctx context.Context, nc *nats.Conn, items []change.Item) error {
	applied := map[string]*api.ClusterResourcePlacement{}
	for _, it := range items {
		for _, c := range it.Changes {
			if p, ok := c.Payload.(events.PlacementUpserted); ok {
				applied[p.Placement.Name] = &p.Placement
			}
		}
	}
	q := a.queryClient(nc)
	var refused []string
	for _, it := range items {
		for _, c := range it.Changes {
			p, ok := c.Payload.(events.DisruptionUpserted)
			if !ok || p.ClusterResourcePlacementDisruptionBudget == nil {
				continue
			}
			b := p.ClusterResourcePlacementDisruptionBudget
			crp, ok := applied[b.Name]
			if !ok {
				live, err := q.Placement(ctx, b.Name)
				switch {
				case errors.Is(err, query.ErrNotFound):
					continue
				case errors.Is(err, query.ErrNoStatusService):
					a.warn("cannot check disruption budgets against their placements (%v)", err)
					return nil
				case err != nil:
					return fmt.Errorf("read the placement %s to check its disruption budget: %w", b.Name, err)
				}
				crp = live
			}
			for _, e := range api.ValidateDisruptionBudgetForPlacement(b, crp) {
				refused = append(refused, fmt.Sprintf("%s: %s: %s: %s", it.Where, it.Object, e.Field, e.Detail))
			}
		}
	}
	for _, line := range refused {
		fmt.Fprintln(a.err, line)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%d disruption budget(s) refused for their placement's type; nothing was published", len(refused))
	}
	return nil
}
