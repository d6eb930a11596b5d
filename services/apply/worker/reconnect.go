package worker

import (
	"context"
	"time"
)

// A member whose API server is down fails every placement it gets; the backoff of the
// queue then grows to minutes, and a member that comes back would wait that long for its
// placements. Instead, a placement that failed because the member could not be reached is
// stranded: the worker probes the member every ProbePeriod while any placement is, and
// retries them all at once when it answers again. (A member that answers probes but times
// out on writes, as an overloaded one does, gets its placements back every ProbePeriod at
// most, still no more than Placements at a time.)

// strand records that it failed because the member could not be reached.
func (w *Worker) strand(it item) {
	w.mu.Lock()
	w.stranded[it] = true
	w.mu.Unlock()
	w.unreachable()
}

// unreachable wakes reconnect: the member could not be reached, by a placement or by
// a heartbeat.
func (w *Worker) unreachable() {
	select {
	case w.strandedWake <- struct{}{}:
	default:
	}
}

// reconnect, once the member could not be reached, probes it until it answers; then it
// renews the watches of the member's objects (see watcher.restart), queues the stranded
// placements again with their backoff forgotten, and publishes a heartbeat, so that the
// fleet sees the member healthy without waiting a heartbeat period.
func (w *Worker) reconnect(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.strandedWake:
		}
		if !w.awaitMember(ctx) {
			return
		}
		w.watch.restart()
		w.mu.Lock()
		items := make([]item, 0, len(w.stranded))
		for it := range w.stranded {
			items = append(items, it)
		}
		clear(w.stranded)
		w.mu.Unlock()
		w.log.Info("member reachable again; applying the placements that failed to reach it", "placements", len(items))
		for _, it := range items {
			w.queue.Forget(it)
			w.queue.Add(it)
		}
		w.heartbeat(ctx, Properties(ctx, w.applier.Dynamic(), w.cfg.Cluster, time.Now()))
	}
}

// awaitMember probes the member every ProbePeriod until it answers (true) or ctx ends.
func (w *Worker) awaitMember(ctx context.Context) bool {
	t := time.NewTicker(w.cfg.ProbePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if w.applier.Probe(ctx) == nil {
			return true
		}
	}
}
