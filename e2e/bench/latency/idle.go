package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

// idlePrefix names the placements that are in place before the measured runs. They sort
// before the measured ones (bench-...), and the rollout re-selects every live placement
// after a hub change in name order, so they are on the measured path: the worst case.
const idlePrefix = "a-idle-"

// placeIdle places n small placements (a namespace with one ConfigMap each) and waits,
// untimed, until all are applied: a fleet that already holds work, as a real one does.
func (b *bench) placeIdle(ctx context.Context, n int) error {
	var docs []map[string]any
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("idle-%03d", i)
		docs = append(docs,
			map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings", "namespace": ns},
				"data": map[string]any{"mode": "idle"}},
			placement(fmt.Sprintf("%s%03d", idlePrefix, i), ns, ""),
		)
	}
	path := filepath.Join(b.workDir, "idle", "idle.yaml")
	if err := writeYAML(path, docs...); err != nil {
		return err
	}
	start := time.Now()
	if err := b.fleetctl(ctx, "apply", "-f", path); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout+time.Duration(n)*time.Second)
	defer cancel()
	for {
		list, err := b.query.Placements(ctx, "")
		applied := 0
		for i := range list {
			p := &list[i]
			if strings.HasPrefix(p.Name, idlePrefix) &&
				conditionTrue(p.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType), p.Generation) {
				applied++
			}
		}
		if err == nil && applied == n {
			fmt.Fprintf(b.progress, "%d idle placements applied in %s\n", n, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d idle placements to be applied (%d are, %v): %w", n, applied, err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
