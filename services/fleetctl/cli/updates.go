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

// checkUpdates judges every placement the items upsert against the live placement, as the
// status service shows it, by the rule the scheduler, the rollout and the status service
// apply (api.ValidateSpecUpdate: placementType immutable, tolerations only added). A
// refused update would change nothing anywhere, so it is an error here, with its field
// path, and nothing is published. When the status service cannot be asked, a warning
// says so and the services judge alone.
func (a *app) checkUpdates(ctx context.Context, nc *nats.Conn, items []change.Item) error {
	q := a.queryClient(nc)
	var refused []string
	for _, it := range items {
		for _, c := range it.Changes {
			p, ok := c.Payload.(events.PlacementUpserted)
			if !ok {
				continue
			}
			live, err := q.Placement(ctx, p.Placement.Name)
			switch {
			case errors.Is(err, query.ErrNotFound):
				continue // a new placement, or one deleted: any spec goes
			case errors.Is(err, query.ErrNoStatusService):
				a.warn("cannot check updates against the live placements (%v); the services refuse what the Fleet rules forbid", err)
				return nil
			case err != nil:
				return fmt.Errorf("read the live placement %s to check the update: %w", p.Placement.Name, err)
			}
			ext := api.ExternalPlacement(&p.Placement)
			object := change.ObjectName(api.PlacementGroupVersion.WithKind(ext.Kind), ext.Name)
			if ext.Kind == "" {
				object = change.ObjectName(api.PlacementGroupVersion.WithKind(api.ClusterResourcePlacementKind), ext.Name)
			}
			for _, e := range api.ValidateSpecUpdate(&live.Spec, &p.Placement.Spec) {
				refused = append(refused, fmt.Sprintf("%s: %s: %s: %s", it.Where, object, e.Field, e.Detail))
			}
		}
	}
	for _, line := range refused {
		fmt.Fprintln(a.err, line)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%d update(s) refused by the Fleet rules, against the live placements; nothing was published", len(refused))
	}
	return nil
}

// checkOverrides applies, before anything is published, the rules the services apply to
// overrides, against the live ones (as the status service shows them) and those earlier in
// this apply: an object is selected by one override of each kind at most (upstream's
// webhook; the error names both overrides), and an override's placement cannot change. A
// refused override would change nothing anywhere, so it is an error here. When the status
// service cannot be asked, a warning says so and the services judge alone.
func (a *app) checkOverrides(ctx context.Context, nc *nats.Conn, items []change.Item) error {
	type applied struct {
		item     change.Item
		override api.Override
	}
	var mine []applied
	for _, it := range items {
		for _, c := range it.Changes {
			if p, ok := c.Payload.(events.OverrideUpserted); ok {
				obj := p.Object()
				api.Default(obj)
				o, _ := api.OverrideOf(obj)
				mine = append(mine, applied{it, o})
			}
		}
	}
	if len(mine) == 0 {
		return nil
	}
	live, err := a.liveOverrides(ctx, nc)
	switch {
	case errors.Is(err, query.ErrNoStatusService):
		a.warn("cannot check overrides against the live ones (%v); the services refuse what the Fleet rules forbid", err)
		return nil
	case err != nil:
		return err
	}
	var refused []string
	for _, m := range mine {
		others := make([]api.Override, 0, len(live))
		for _, o := range live {
			others = append(others, o)
		}
		api.SortOverrides(others)
		errs := api.OverrideConflicts(m.override, others)
		if prev, ok := live[m.override.Key]; ok {
			errs = append(errs, api.ValidateOverrideUpdate(prev, m.override)...)
		}
		for _, e := range errs {
			refused = append(refused, fmt.Sprintf("%s: %s: %s: %s", m.item.Where, m.item.Object, e.Field, e.Detail))
		}
		if len(errs) == 0 {
			live[m.override.Key] = m.override
		}
	}
	for _, line := range refused {
		fmt.Fprintln(a.err, line)
	}
	if len(refused) > 0 {
		return fmt.Errorf("%d override problem(s) against the live overrides and the others applied; nothing was published", len(refused))
	}
	return nil
}

// liveOverrides reads every live override from the status service, by key.
func (a *app) liveOverrides(ctx context.Context, nc *nats.Conn) (map[api.OverrideKey]api.Override, error) {
	q := a.queryClient(nc)
	live := map[api.OverrideKey]api.Override{}
	cros, err := q.ClusterResourceOverrides(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read the live ClusterResourceOverrides to check the overrides: %w", err)
	}
	for i := range cros {
		o, _ := api.OverrideOf(&cros[i])
		live[o.Key] = o
	}
	ros, err := q.ResourceOverrides(ctx, "", "")
	if err != nil {
		return nil, fmt.Errorf("read the live ResourceOverrides to check the overrides: %w", err)
	}
	for i := range ros {
		o, _ := api.OverrideOf(&ros[i])
		live[o.Key] = o
	}
	return live, nil
}
