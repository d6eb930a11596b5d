package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/preview"
)

// timePreview runs `fleetctl apply --dry-run=server -o json` on the placement
// with a new version of its objects, in this process as a user's fleetctl
// would, and notes how long the whole answer took: the scheduler's decision,
// the rollout's render and plan, and every picked member's answer.
func (b *bench) timePreview(ctx context.Context) error {
	doc := placementSpec{name: placementName, namespace: namespace, pick: b.opts.pick, objects: b.opts.objects, version: "preview"}.yaml()
	var out, errOut bytes.Buffer
	start := time.Now()
	err := cli.Run(ctx, []string{"--nats", b.nc.ConnectedUrl(), "apply", "--dry-run=server", "-o", "json", "-f", "-"}, cli.Options{
		In: strings.NewReader(doc), Out: &out, Err: &errOut, Getenv: func(string) string { return "" },
	})
	b.m.preview = time.Since(start)
	if err != nil {
		return fmt.Errorf("fleetctl apply --dry-run=server: %w\n%s", err, errOut.String())
	}
	var res preview.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return fmt.Errorf("read the preview: %w", err)
	}
	answered, updates := 0, 0
	for _, p := range res.Placements {
		for _, m := range p.Members {
			if !m.NoAnswer && m.Error == "" {
				answered++
			}
			for _, o := range m.Objects {
				if o.Outcome == events.PreviewUpdate {
					updates++
				}
			}
		}
	}
	b.m.previewSummary = fmt.Sprintf("%d bytes of JSON, %d members answered, %d objects to update", out.Len(), answered, updates)
	fmt.Fprintf(b.progress, "preview answered in %s\n", b.m.preview.Round(time.Millisecond))
	return nil
}
