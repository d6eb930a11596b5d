package hubsync

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// notWatched are the resources of a hub that are the cluster's own doing, never placed:
// events, leases, endpoints, pods and nodes, and revisions controllers keep.
var notWatched = map[schema.GroupResource]bool{
	{Resource: "events"}:                                    true,
	{Group: "events.k8s.io", Resource: "events"}:            true,
	{Group: "coordination.k8s.io", Resource: "leases"}:      true,
	{Resource: "endpoints"}:                                 true,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}: true,
	{Resource: "pods"}:                                      true,
	{Resource: "nodes"}:                                     true,
	{Resource: "componentstatuses"}:                         true,
	{Group: "apps", Resource: "controllerrevisions"}:        true,
}

// watched is one resource the watcher follows.
type watched struct {
	gvk      schema.GroupVersionKind
	informer cache.SharedIndexInformer
}

// watcher follows every listable resource of the hub (found by discovery, again every
// rediscover period so that kinds added later are followed too) with informers, and says
// when anything changed.
type watcher struct {
	disc    discovery.DiscoveryInterface
	factory dynamicinformer.DynamicSharedInformerFactory
	log     *slog.Logger
	changed chan struct{}
	// onObject, when set, hears of every object added or updated (not deleted), with its
	// kind: the status writer follows placements and members with it.
	onObject func(schema.GroupVersionKind, *unstructured.Unstructured)

	mu      sync.Mutex
	watched map[schema.GroupVersionResource]*watched
}

func newWatcher(disc discovery.DiscoveryInterface, dyn dynamic.Interface, log *slog.Logger) *watcher {
	return &watcher{
		disc: disc, factory: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), log: log,
		changed: make(chan struct{}, 1), watched: map[schema.GroupVersionResource]*watched{},
	}
}

// rediscover is how often the watcher looks for new kinds.
const rediscover = 30 * time.Second

// run discovers and watches until ctx ends.
func (w *watcher) run(ctx context.Context) error {
	for {
		w.discover(ctx)
		w.factory.Start(ctx.Done())
		select {
		case <-ctx.Done():
			w.factory.Shutdown()
			return nil
		case <-time.After(rediscover):
		}
	}
}

// discover starts an informer for every listable, watchable resource not followed yet, at
// its preferred version. A group whose discovery fails is skipped this time.
func (w *watcher) discover(ctx context.Context) {
	lists, err := w.disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		w.log.Warn("discover the hub's resources", "error", err)
		return
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue
			}
			if notWatched[schema.GroupResource{Group: gv.Group, Resource: r.Name}] {
				continue
			}
			w.follow(gv.WithResource(r.Name), gv.WithKind(r.Kind))
		}
	}
}

func (w *watcher) follow(gvr schema.GroupVersionResource, gvk schema.GroupVersionKind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watched[gvr]; ok {
		return
	}
	inf := w.factory.ForResource(gvr).Informer()
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	seen := func(o any) {
		notify()
		if u, ok := o.(*unstructured.Unstructured); ok && w.onObject != nil {
			w.onObject(gvk, u)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen,
		UpdateFunc: func(old, o any) {
			if statusOnly(gvk, old, o) {
				// hubsync's own status writes: nothing to publish, no pass.
				if u, ok := o.(*unstructured.Unstructured); ok && w.onObject != nil {
					w.onObject(gvk, u)
				}
				return
			}
			seen(o)
		},
		DeleteFunc: func(any) { notify() },
	})
	w.watched[gvr] = &watched{gvk: gvk, informer: inf}
	w.log.Debug("watching hub resource", "resource", gvr.String(), "kind", gvk.Kind)
}

// snapshot is every object of the kinds whose informers have synced.
func (w *watcher) snapshot() Snapshot {
	w.mu.Lock()
	all := make([]*watched, 0, len(w.watched))
	for _, x := range w.watched {
		all = append(all, x)
	}
	w.mu.Unlock()
	snap := Snapshot{Known: map[schema.GroupKind]bool{}}
	for _, x := range all {
		if !x.informer.HasSynced() {
			continue
		}
		snap.Known[x.gvk.GroupKind()] = true
		for _, o := range x.informer.GetStore().List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if u.GetAPIVersion() == "" {
				u = u.DeepCopy()
				u.SetGroupVersionKind(x.gvk)
			}
			snap.Objects = append(snap.Objects, u)
		}
	}
	return snap
}

// synced reports whether every informer started so far has its first list.
func (w *watcher) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.watched {
		if !x.informer.HasSynced() {
			return false
		}
	}
	return len(w.watched) > 0
}

// get returns one object of a followed kind from the informers' cache.
func (w *watcher) get(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, bool) {
	w.mu.Lock()
	x := w.watched[gvr]
	w.mu.Unlock()
	if x == nil {
		return nil, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	o, ok, err := x.informer.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// list returns the objects of a followed resource.
func (w *watcher) list(gvr schema.GroupVersionResource) []*unstructured.Unstructured {
	w.mu.Lock()
	x := w.watched[gvr]
	w.mu.Unlock()
	if x == nil {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, o := range x.informer.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out
}

// statusOnly reports whether an update of a placement (either kind), member cluster,
// eviction or run changed nothing but its status (their status is a subresource: the spec's
// changes bump the generation).
func statusOnly(gvk schema.GroupVersionKind, old, cur any) bool {
	switch gvk {
	case crds.Placement.GVK, crds.ResourcePlacement.GVK, crds.Member.GVK, crds.Eviction.GVK, crds.StagedUpdateRun.GVK:
	default:
		return false
	}
	a, ok1 := old.(*unstructured.Unstructured)
	b, ok2 := cur.(*unstructured.Unstructured)
	return ok1 && ok2 && a.GetGeneration() == b.GetGeneration() &&
		maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations()) &&
		(a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil)
}
