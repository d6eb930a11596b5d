// Package applier applies a placement's desired state to one member cluster
// and reports what happened to each object: server-side apply in dependency
// order, ownership marks, takeover of existing objects, drift and diff
// detection, envelopes, per-kind availability, and deletion of exactly what a
// placement owns.
//
// An Applier keeps, per placement, what it last saw of each object (in memory
// only: after a restart it rebuilds from the desired state and the member's
// objects).
package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// FieldManager is the server-side apply field manager of every change
// Flotilla makes.
const FieldManager = "flotilla"

// Options configures an Applier.
type Options struct {
	// Cluster is the member's name, used in reports and logs.
	Cluster string
	// MaxInFlight bounds the requests in flight to the member, shared by
	// every placement (a dependency wave's objects are applied at once up
	// to it). Default DefaultMaxInFlight.
	MaxInFlight int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Applier applies placements to one member cluster. It is safe for
// concurrent use; calls for the same placement run one at a time.
type Applier struct {
	cluster string
	dyn     dynamic.Interface
	// watchDyn is dyn without a client-side timeout, for informers.
	watchDyn dynamic.Interface
	meta     metadata.Interface
	disc     discovery.CachedDiscoveryInterface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	// workers bounds the objects of a run processed at once: MaxInFlight
	// (each has one request in flight at a time; more would only wait).
	workers  int
	log      *slog.Logger
	now      func() time.Time
	objLocks keyedMutex

	mu         sync.Mutex
	placements map[string]*placement

	scanMu sync.Mutex
	scan   *memberScan // the last search of the member; see ownedAfter
	// scanRefresh: a first run used a search older than scanRefreshAfter.
	scanRefresh bool
}

// New returns an Applier for the member reached through cfg. It makes no
// request yet. cfg's client-side rate limit is lifted (a copy is changed):
// the requests in flight are bounded by MaxInFlight instead.
func New(cfg *rest.Config, opts Options) (*Applier, error) {
	if opts.Cluster == "" {
		return nil, errors.New("new applier: cluster name is required")
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Wrap(newInFlight(opts.MaxInFlight))
	// Deprecation warnings of the kinds a scan lists are noise here.
	cfg.WarningHandler = rest.NoWarnings{}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new applier for %s: %w", opts.Cluster, err)
	}
	// rest.Config's Timeout bounds watches too: a watch cut every 30 s is
	// restarted, with client-go's backoff growing each time. Watches run on a
	// client of their own without it; the server ends them (timeoutSeconds).
	watchCfg := rest.CopyConfig(cfg)
	watchCfg.Timeout = 0
	watchDyn, err := dynamic.NewForConfig(watchCfg)
	if err != nil {
		return nil, fmt.Errorf("new applier for %s: %w", opts.Cluster, err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new applier for %s: %w", opts.Cluster, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("new applier for %s: %w", opts.Cluster, err)
	}
	cached := memory.NewMemCacheClient(dc)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Applier{
		cluster:    opts.Cluster,
		dyn:        dyn,
		watchDyn:   watchDyn,
		meta:       meta,
		disc:       cached,
		mapper:     restmapper.NewDeferredDiscoveryRESTMapper(cached),
		workers:    opts.MaxInFlight,
		log:        opts.Logger.With("cluster", opts.Cluster),
		now:        opts.Now,
		placements: map[string]*placement{},
	}, nil
}

// Cluster is the member's name.
func (a *Applier) Cluster() string { return a.cluster }

// Dynamic is the Applier's dynamic client, for watching the objects it owns.
func (a *Applier) Dynamic() dynamic.Interface { return a.dyn }

// Watching is a dynamic client for informers on the member's objects: unlike Dynamic's,
// its requests have no client-side timeout, which would cut every watch.
func (a *Applier) Watching() dynamic.Interface { return a.watchDyn }

// placement is what the Applier knows about one placement on its member.
type placement struct {
	mu sync.Mutex
	// work is the desired state last applied; nil before the first Apply.
	work     *events.WorkDesired
	strategy api.ApplyStrategy
	objects  []*tracked
	byKey    map[manifest.Key]*tracked
	// scanned is set once the member has been searched for the objects the
	// placement owns since this process started, so later runs can tell
	// stale objects from the previous desired state alone.
	scanned bool
	// ranUntil is when the last Apply of the placement ended: a search of
	// the member that started before it may miss what that run applied.
	ranUntil time.Time
	// report is the latest result.
	report *events.WorkReported
}

// tracked is one object of a placement's desired state.
type tracked struct {
	obj        manifest.Object
	gvr        schema.GroupVersionResource
	namespaced bool
	mapped     bool
	result     events.ManifestResult
	// owned is set when the placement owns the member object (created,
	// taken over or already marked), so changes to it are drift.
	owned bool
	// live is the member object as last read or applied; nil when missing.
	live *unstructured.Unstructured
	// synced is the member object when it was last known to match the hub;
	// digest is its diff.Digest, computed when first needed.
	synced       *unstructured.Unstructured
	digest       string
	appliedAt    time.Time
	firstDrifted time.Time
	firstDiffed  time.Time
	recheckAt    time.Time
}

// setSynced records the member object as matching the hub.
func (t *tracked) setSynced(u *unstructured.Unstructured) {
	t.synced, t.digest = u, ""
}

// syncedDigest is the diff.Digest of the object last known to match the hub.
func (t *tracked) syncedDigest() string {
	if t.digest == "" && t.synced != nil {
		t.digest = diff.Digest(t.synced)
	}
	return t.digest
}

func (a *Applier) state(name string) *placement {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.placements[name]
	if p == nil {
		p = &placement{byKey: map[manifest.Key]*tracked{}}
		a.placements[name] = p
	}
	return p
}

func (a *Applier) existing(name string) *placement {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.placements[name]
}

func (a *Applier) forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.placements, name)
}

// Placements lists the placements the Applier holds state for.
func (a *Applier) Placements() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.placements))
	for n := range a.placements {
		out = append(out, n)
	}
	return out
}

// Watched lists the resources of the objects placements own on the member,
// for a watcher that reports their changes back through Recheck.
func (a *Applier) Watched() []schema.GroupVersionResource {
	a.mu.Lock()
	ps := make([]*placement, 0, len(a.placements))
	for _, p := range a.placements {
		ps = append(ps, p)
	}
	a.mu.Unlock()
	seen := map[schema.GroupVersionResource]bool{}
	var out []schema.GroupVersionResource
	for _, p := range ps {
		p.mu.Lock()
		for _, t := range p.objects {
			if t.owned && t.mapped && !seen[t.gvr] {
				seen[t.gvr] = true
				out = append(out, t.gvr)
			}
		}
		p.mu.Unlock()
	}
	return out
}

// Report returns the latest report of a placement, nil if there is none.
func (a *Applier) Report(placementName string) *events.WorkReported {
	p := a.existing(placementName)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.report
}

// keyedMutex serialises work on one member object across placements, so
// that co-owners do not lose each other's ownership marks.
type keyedMutex struct {
	m sync.Map // manifest.Key -> *sync.Mutex
}

func (k *keyedMutex) lock(key manifest.Key) func() {
	v, _ := k.m.LoadOrStore(key, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// forEach runs fn for each item with at most n running at once, and returns
// when all have finished or ctx ended.
func forEach[T any](ctx context.Context, n int, items []T, fn func(T)) {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, it := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(it)
		})
	}
	wg.Wait()
}
