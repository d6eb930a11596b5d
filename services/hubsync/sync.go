package hubsync

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// Pass is what one pass of the syncer did.
type Pass struct {
	// Published, Unchanged: upserts stored as new events, and those the bus already held
	// (the last event on the subject said the same).
	Published, Unchanged int
	// Undone are records whose object left the hub: their deletions, published.
	Undone int
	// Problems are hub objects that could not be published.
	Problems []Problem
}

// syncer makes the bus say what the hub says: each pass computes what the hub asks for and
// publishes the difference from the records, as fleetctl apply and delete would.
type syncer struct {
	watch *watcher
	pub   *submit.Publisher
	recs  *records
	conv  *Conversions
	log   *slog.Logger
	// namespace is hubsync's own on the hub, never published.
	namespace string
	// reported are the problems already logged, so that a pass repeats none.
	reported map[Problem]bool
}

// owns reports whether the placement, eviction or staged update run of that namespace and
// name (a ResourcePlacement's namespace, "" for the cluster-scoped kinds) was published from
// the hub's object of that kind, namespace and name (and not by fleetctl, or from a policy):
// a ResourcePlacement and a ClusterResourcePlacement of one name are two placements.
func (s *syncer) owns(gvk schema.GroupVersionKind, namespace, name string) bool {
	var subject string
	var err error
	switch gvk {
	case crds.Placement.GVK:
		subject, err = events.PlacementSubject(name)
	case crds.ResourcePlacement.GVK:
		if namespace == "" {
			return false
		}
		subject, err = events.PlacementSubject(api.PlacementKey(namespace, name))
	case crds.Eviction.GVK:
		subject, err = events.DisruptionSubject(events.DisruptionKey{Kind: gvk.Kind, Name: name})
	case crds.StagedUpdateRun.GVK:
		subject, err = events.StagedUpdateSubject(events.StagedUpdateKey{Kind: gvk.Kind, Name: name})
	default:
		return false
	}
	if err != nil {
		return false
	}
	r, ok := s.recs.get(subject)
	return ok && r.Source == SourceOf(gvk.GroupKind(), namespace, name)
}

// pass runs once: upserts first (members, then hub objects, then placements), then the
// deletions of what left the hub (placements first).
func (s *syncer) pass(ctx context.Context) (Pass, error) {
	var p Pass
	snap := s.watch.snapshot()
	snap.SystemNamespace = s.namespace
	d, err := Compute(ctx, snap, s.conv)
	if err != nil {
		return p, err
	}
	s.conv.sweep()
	p.Problems = d.Problems
	s.report(d.Problems)

	recs := s.recs.all()
	var ups []Want
	for subject, w := range d.Wants {
		if r, ok := recs[subject]; !ok || r.Hash != w.Record.Hash || r.Source != w.Record.Source {
			ups = append(ups, w)
		}
	}
	slices.SortFunc(ups, func(a, b Want) int {
		return cmp.Or(cmp.Compare(a.Record.Class.Rank(), b.Record.Class.Rank()), cmp.Compare(a.Record.Subject, b.Record.Subject))
	})
	var undos []Record
	for subject, r := range recs {
		if _, wanted := d.Wants[subject]; wanted || !d.Known[sourceGroupKind(r.Source)] || d.Present[r.Source] {
			continue // still asked for, of a kind not seen whole yet, or still on the hub
		}
		undos = append(undos, r)
	}
	slices.SortFunc(undos, func(a, b Record) int {
		return cmp.Or(cmp.Compare(b.Class.Rank(), a.Class.Rank()), cmp.Compare(a.Subject, b.Subject))
	})

	if err := s.upsert(ctx, ups, &p); err != nil {
		return p, err
	}
	if err := s.undo(ctx, undos, &p); err != nil {
		return p, err
	}
	return p, nil
}

func (s *syncer) upsert(ctx context.Context, ups []Want, p *Pass) error {
	if len(ups) == 0 {
		return nil
	}
	cs := make([]change.Change, len(ups))
	for i, w := range ups {
		cs[i] = w.Change
	}
	outcomes, err := s.pub.PublishAll(ctx, cs)
	if err != nil {
		return fmt.Errorf("publish %d change(s): %w", len(cs), err)
	}
	for i, w := range ups {
		if outcomes[i] == submit.Published {
			p.Published++
			s.log.Info("published", "type", w.Change.Type, "subject", w.Change.Subject, "from", w.Record.Source)
		} else {
			p.Unchanged++
		}
		if err := s.recs.put(ctx, w.Record); err != nil {
			return err
		}
	}
	return nil
}

func (s *syncer) undo(ctx context.Context, undos []Record, p *Pass) error {
	if len(undos) == 0 {
		return nil
	}
	cs := make([]change.Change, len(undos))
	for i, r := range undos {
		cs[i] = r.Undo.Change()
	}
	if _, err := s.pub.PublishAll(ctx, cs); err != nil {
		return fmt.Errorf("publish %d deletion(s): %w", len(cs), err)
	}
	for _, r := range undos {
		p.Undone++
		s.log.Info("published", "type", r.Undo.Type, "subject", r.Undo.Subject, "from", r.Source)
		if err := s.recs.remove(ctx, r.Subject); err != nil {
			return err
		}
	}
	return nil
}

// report logs each problem once, with its field paths.
func (s *syncer) report(problems []Problem) {
	now := map[Problem]bool{}
	for _, pr := range problems {
		now[pr] = true
		if !s.reported[pr] {
			s.log.Warn("hub object not published", "object", pr.Source, "problem", pr.Detail)
		}
	}
	s.reported = now
}

// Pacing of the passes.
const (
	// settle lets a burst of hub changes (kubectl apply of a file) end before a pass.
	settle = 100 * time.Millisecond
	// resync runs a pass now and then even with no change seen.
	resync = 5 * time.Minute
	// maxBackoff bounds the wait before retrying a failed pass.
	maxBackoff = 30 * time.Second
	// purgeEvery is how often the markers of forgotten records are purged.
	purgeEvery = time.Hour
)

// run waits for the informers' first lists, then runs a pass after every change (settled)
// and every resync, retrying failed passes with backoff, until ctx ends.
func (s *syncer) run(ctx context.Context, afterPass func(Pass)) error {
	for !s.watch.synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	backoff := time.Second
	purged := time.Now()
	for {
		p, err := s.pass(ctx)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Warn("sync with the hub failed; retrying", "error", err, "in", backoff)
			wait, backoff = backoff, min(2*backoff, maxBackoff)
		default:
			backoff = time.Second
			wait = resync
			if time.Since(purged) > purgeEvery {
				s.recs.purgeMarkers(ctx, s.log)
				purged = time.Now()
			}
			if afterPass != nil {
				afterPass(p)
			}
		}
		if err := s.waitForChange(ctx, wait); err != nil {
			return nil
		}
	}
}

// waitForChange returns after a change has settled, or after wait.
func (s *syncer) waitForChange(ctx context.Context, wait time.Duration) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	case <-s.watch.changed:
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.watch.changed:
		case <-time.After(settle):
			return nil
		}
	}
}
