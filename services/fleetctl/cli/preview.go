package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/preview"
)

// previewApply is apply --dry-run=server: the files are read and validated as
// apply reads and checks them, then each placement among them is previewed
// against the live fleet (package preview). Nothing is published.
func (a *app) previewApply(ctx context.Context, files fileFlags, output string, memberTimeout time.Duration) error {
	items, err := a.load(files)
	if err != nil {
		return err
	}
	in, err := previewInput(items)
	if err != nil {
		return err
	}
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	// What apply would refuse, the preview refuses too: Fleet's update rules against the
	// live placements, and the overrides against the live ones.
	if err := a.checkUpdates(ctx, nc, items); err != nil {
		return err
	}
	if err := a.checkOverrides(ctx, nc, items); err != nil {
		return err
	}
	res, err := preview.Run(ctx, nc, in, preview.Options{HubTimeout: a.requestTimeout, MemberTimeout: memberTimeout})
	if err != nil {
		return err
	}
	if err := preview.Write(a.out, res, output); err != nil {
		return err
	}
	if len(res.Partial) > 0 {
		return fmt.Errorf("%w: %d member(s) did not answer within %s: %s", preview.ErrPartial, len(res.Partial), memberTimeout, strings.Join(res.Partial, ", "))
	}
	return nil
}

// previewInput is the placements and hub objects among items.
func previewInput(items []change.Item) (preview.Input, error) {
	var in preview.Input
	for _, it := range items {
		for _, c := range it.Changes {
			switch p := c.Payload.(type) {
			case events.PlacementUpserted:
				crp := p.Placement
				api.SetDefaults(&crp)
				in.Placements = append(in.Placements, crp)
			case events.OverrideUpserted:
				in.Overrides = append(in.Overrides, p)
			case events.HubResourceUpserted:
				if len(p.Manifest) > 0 {
					in.Objects = append(in.Objects, json.RawMessage(p.Manifest))
				}
			}
		}
	}
	if len(in.Placements) == 0 {
		return in, errors.New("--dry-run=server previews placements: the files hold no ClusterResourcePlacement")
	}
	return in, nil
}
