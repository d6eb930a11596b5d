package worker

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// check is a member object whose change a placement must examine.
type check struct {
	placement string
	gvr       schema.GroupVersionResource
	key       manifest.Key
}

// watcher runs informers on the resources of the objects the worker's
// placements own (selected by Flotilla's label, so nothing else is cached)
// and queues a check for every change.
type watcher struct {
	w *Worker
	// wake asks for informers on newly owned resources; renew for new informers
	// on every resource (see renew).
	wake, renew chan struct{}

	mu        sync.Mutex
	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

func newWatcher(w *Worker) *watcher {
	return &watcher{
		w:     w,
		wake:  make(chan struct{}, 1),
		renew: make(chan struct{}, 1),
	}
}

// sync asks the watcher to start informers for resources placements now own.
func (x *watcher) sync() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// restart asks the watcher to replace every informer, for when the member's API
// server is back after an outage. An informer whose watch failed for that long
// retries with client-go's backoff, up to 30 s between lists, so it could learn of
// changes (a Deployment becoming available) half a minute after the member is back;
// new informers list at once, and their first list queues a check of every object.
func (x *watcher) restart() {
	select {
	case x.renew <- struct{}{}:
	default:
	}
}

func (x *watcher) run(ctx context.Context) {
	stop := x.reset(nil)
	defer func() {
		close(stop)
		x.factory.Shutdown()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-x.renew:
			x.w.log.Info("member back: watching its objects afresh")
			stop = x.reset(stop)
		case <-x.wake:
		}
		started := false
		for _, gvr := range x.w.applier.Watched() {
			x.mu.Lock()
			_, have := x.informers[gvr]
			if !have {
				inf := x.factory.ForResource(gvr).Informer()
				_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
					AddFunc:    func(obj any) { x.changed(gvr, obj) },
					UpdateFunc: func(_, obj any) { x.changed(gvr, obj) },
					DeleteFunc: func(obj any) { x.changed(gvr, obj) },
				})
				x.informers[gvr] = inf
				started = true
			}
			x.mu.Unlock()
		}
		if started {
			x.factory.Start(stop)
		}
	}
}

// reset stops the informers of stop's generation, if any, and makes a new factory
// with no informers, whose generation the returned channel stops. The resources
// placements own are watched again at once.
func (x *watcher) reset(stop chan struct{}) chan struct{} {
	if stop != nil {
		close(stop)
		x.factory.Shutdown()
	}
	x.mu.Lock()
	x.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(x.w.applier.Watching(), 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = manifest.ManagedBySelector })
	x.informers = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	x.mu.Unlock()
	x.sync()
	return make(chan struct{})
}

// changed queues a check of obj for each placement that owns it.
func (x *watcher) changed(gvr schema.GroupVersionResource, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	key := manifest.Key{Group: gvr.Group, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	for _, p := range x.w.placementFor(manifest.OwnerTokens(u.GetLabels())) {
		x.w.checks.Add(check{placement: p, gvr: gvr, key: key})
	}
}

// lookup returns the object as the informer last saw it, not a copy: the
// caller must not change it (Recheck copies what it keeps). Nil when it is gone
// (or lost Flotilla's label).
func (x *watcher) lookup(gvr schema.GroupVersionResource, key manifest.Key) *unstructured.Unstructured {
	x.mu.Lock()
	inf := x.informers[gvr]
	x.mu.Unlock()
	if inf == nil {
		return nil
	}
	storeKey := key.Name
	if key.Namespace != "" {
		storeKey = key.Namespace + "/" + key.Name
	}
	obj, exists, err := inf.GetStore().GetByKey(storeKey)
	if err != nil || !exists {
		return nil
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}

// runChecks examines queued member changes until the queue shuts down.
func (w *Worker) runChecks(ctx context.Context) {
	for {
		c, shutdown := w.checks.Get()
		if shutdown {
			return
		}
		live := w.watch.lookup(c.gvr, c.key)
		unlock := w.locks.lock(c.placement)
		reports, err := w.applier.Recheck(ctx, c.placement, c.key, live)
		switch len(reports) {
		case 0:
		case 1:
			w.publishSoon(ctx, reports[0])
		default:
			// A sequence (drift found, then corrected) tells a story: each goes out.
			w.dropPending(c.placement)
			for _, r := range reports {
				w.publish(ctx, r)
			}
		}
		unlock()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("checking a member change failed; will retry", "placement", c.placement, "object", c.key.String(), "err", err)
			w.checks.AddRateLimited(c)
		} else {
			w.checks.Forget(c)
		}
		w.checks.Done(c)
	}
}
