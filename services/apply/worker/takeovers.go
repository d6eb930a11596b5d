package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/events"
)

// publishTakeovers sends, before report r, the takeover decisions of its run
// that do not fit in it (events.SplitTakeovers): a run that adopts hundreds
// of existing objects records each decision. Each chunk is retried until the
// bus takes it or ctx ends; its id is fixed by its content, so a retry or a
// redelivered work is dropped as a duplicate.
func (w *Worker) publishTakeovers(ctx context.Context, r *events.WorkReported) {
	rest := events.SplitTakeovers(r)
	if len(rest) == 0 {
		return
	}
	subject, err := events.WorkStatusSubject(r.Cluster, r.Placement)
	if err != nil {
		w.log.Error("cannot publish takeover decisions", "placement", r.Placement, "err", err)
		return
	}
	for i, chunk := range rest {
		d := events.TakeoversDecided{Cluster: r.Cluster, Placement: r.Placement, ResourceIndex: r.ResourceIndex,
			Generation: r.Generation, Takeovers: chunk}
		first := chunk[0]
		id := events.ID("takeovers", r.Cluster, r.Placement, fmt.Sprint(r.ResourceIndex, "/", r.Generation),
			first.DecidedAt.Format(time.RFC3339Nano), first.Resource.Kind, first.Resource.Namespace, first.Resource.Name, fmt.Sprint(i))
		ev, err := events.New(events.TypeTakeoversDecided, w.source, subject, id, d)
		if err != nil {
			w.log.Error("cannot publish takeover decisions", "placement", r.Placement, "err", err)
			return
		}
		for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
			if _, err = w.publisher.Publish(ctx, subject, ev); err == nil {
				break
			}
			w.log.Warn("takeover decisions not published yet; retrying", "placement", r.Placement, "in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
	}
	w.log.Info("takeover decisions published beside the report", "placement", r.Placement, "events", len(rest))
}
