package worker

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// maxDiffWatches bounds the member objects watched for ReportDiff placements
// (one watch each, multiplexed on the member connection); past it the others
// refresh with the periodic resync only.
const maxDiffWatches = 1000

// diffWatcher watches, by name, the member objects of ReportDiff placements,
// which carry no Flotilla label, and queues the placement again when one
// changes: its diff report then follows the member, not only the resync.
type diffWatcher struct {
	w    *Worker
	wake chan struct{}

	mu      sync.Mutex
	running map[applier.DiffTarget]context.CancelFunc
}

func newDiffWatcher(w *Worker) *diffWatcher {
	return &diffWatcher{w: w, wake: make(chan struct{}, 1), running: map[applier.DiffTarget]context.CancelFunc{}}
}

// sync asks the watcher to follow the current ReportDiff objects.
func (x *diffWatcher) sync() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *diffWatcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.wake:
		}
		want := map[applier.DiffTarget]bool{}
		targets := x.w.applier.DiffTargets(maxDiffWatches)
		if len(targets) == maxDiffWatches {
			x.w.log.Warn("ReportDiff objects past the watch bound refresh with the resync only", "bound", maxDiffWatches)
		}
		x.mu.Lock()
		for _, t := range targets {
			want[t] = true
			if _, ok := x.running[t]; !ok {
				wctx, cancel := context.WithCancel(ctx)
				x.running[t] = cancel
				go x.follow(wctx, t)
			}
		}
		for t, cancel := range x.running {
			if !want[t] {
				cancel()
				delete(x.running, t)
			}
		}
		x.mu.Unlock()
	}
}

// follow watches one object until ctx ends, queueing its placement on every
// change, and again after a broken watch (a change may have been missed).
func (x *diffWatcher) follow(ctx context.Context, t applier.DiffTarget) {
	r := x.w.applier.Dynamic().Resource(t.GVR).Namespace(t.Namespace)
	sel := fields.OneTermEqualSelector("metadata.name", t.Name).String()
	for first := true; ctx.Err() == nil; first = false {
		list, err := r.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			if !first {
				x.w.queue.Add(item{reconcile, t.Placement})
			}
			var wi watch.Interface
			wi, err = r.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
			if err == nil {
				x.drain(ctx, wi, t.Placement)
			}
		}
		if err != nil {
			x.w.log.Debug("watch of a ReportDiff object failed; retrying", "placement", t.Placement, "object", t.Name, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(x.w.cfg.RetryBase):
		}
	}
}

// drain queues the placement for each change until the watch ends.
func (x *diffWatcher) drain(ctx context.Context, wi watch.Interface, placement string) {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Bookmark && ev.Type != watch.Error {
				x.w.queue.Add(item{reconcile, placement})
			}
		}
	}
}
