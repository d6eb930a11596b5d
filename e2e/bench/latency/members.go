package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// member is one member cluster as the benchmark reaches it.
type member struct {
	name       string
	kubeconfig string
	client     dynamic.Interface
	meta       metadata.Interface // for the observer: names and annotations are all it reads
	raw        rest.Interface     // for -requests: the API server's /metrics
}

func newMember(name, kubeconfig string) (*member, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", name, err)
	}
	unthrottled(rc)
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", name, err)
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", name, err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", name, err)
	}
	return &member{name: name, kubeconfig: kubeconfig, client: c, meta: meta, raw: disc.RESTClient()}, nil
}

// unthrottled lifts client-go's default client-side rate limit (5 QPS), which would
// measure the limiter rather than the API server.
func unthrottled(rc *rest.Config) {
	rc.QPS, rc.Burst = 1000, 2000
}

// observer watches the benchmark objects on every member and records, per object and
// stamp, when a watch event first showed the object with that stamp: the time the change
// became visible on the member, whoever made it.
type observer struct {
	mu      sync.Mutex
	seen    map[observed]time.Time
	changed chan struct{} // closed and replaced on every new record
}

type observed struct {
	member string
	key    objectKey
	stamp  string
}

// observe starts informers for the benchmark objects (those with the run label) on each
// member and returns once their caches have synced. They stop with ctx. They watch the
// objects' metadata only: the observer runs on the machine it measures, and decoding
// every status update of every Deployment in full took CPU the stack and the members
// needed.
func observe(ctx context.Context, members []*member) (*observer, error) {
	o := &observer{seen: map[observed]time.Time{}, changed: make(chan struct{})}
	for _, m := range members {
		factory := metadatainformer.NewFilteredSharedInformerFactory(m.meta, 0, metav1.NamespaceAll,
			func(opts *metav1.ListOptions) { opts.LabelSelector = runLabel })
		for _, gvr := range watchedGVRs {
			inf := factory.ForResource(gvr).Informer()
			record := func(obj any) {
				if u, ok := obj.(*metav1.PartialObjectMetadata); ok {
					o.record(m.name, objectKey{gvr: gvr, namespace: u.GetNamespace(), name: u.GetName()},
						u.GetAnnotations()[stampAnnotation], time.Now())
				}
			}
			if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    record,
				UpdateFunc: func(_, obj any) { record(obj) },
			}); err != nil {
				return nil, fmt.Errorf("watch %s on %s: %w", gvr.Resource, m.name, err)
			}
		}
		factory.Start(ctx.Done())
		for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return nil, fmt.Errorf("watch %s on %s: the cache did not sync", gvr.Resource, m.name)
			}
		}
	}
	return o, nil
}

func (o *observer) record(member string, key objectKey, stamp string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := observed{member: member, key: key, stamp: stamp}
	if _, ok := o.seen[k]; ok {
		return
	}
	o.seen[k] = at
	close(o.changed)
	o.changed = make(chan struct{})
}

// waitAll waits until every key has been seen with stamp on every member, and returns when
// each member had them all (sorted, earliest member first). The times are those of the watch
// events, not of the check.
func (o *observer) waitAll(ctx context.Context, members []*member, keys []objectKey, stamp string) ([]time.Time, error) {
	for {
		o.mu.Lock()
		var done []time.Time
		missing := ""
		for _, m := range members {
			var last time.Time
			for _, k := range keys {
				at, ok := o.seen[observed{member: m.name, key: k, stamp: stamp}]
				if !ok {
					missing = fmt.Sprintf("%s with stamp %s on %s", k, stamp, m.name)
					break
				}
				if at.After(last) {
					last = at
				}
			}
			if missing != "" {
				break
			}
			done = append(done, last)
		}
		changed := o.changed
		o.mu.Unlock()
		if missing == "" {
			sort.Slice(done, func(i, j int) bool { return done[i].Before(done[j]) })
			return done, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the members to show %s: %w", missing, ctx.Err())
		case <-changed:
		}
	}
}
