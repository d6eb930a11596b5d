package faults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// tracker watches the suite's objects on every member and remembers the first UID it saw of
// each: an object deleted, or deleted and created again (a new UID), is what a fault must
// never cause. Informers list again after a member's API server comes back, so an object
// replaced while the watch was down still shows as a UID change.
type tracker struct {
	mu       sync.Mutex
	uids     map[string]types.UID // member/resource/namespace/name -> first UID seen
	deleted  []string             // keys of objects seen deleted
	recreate []string             // keys of objects seen with a second UID
}

// startTracker watches namespaces, ConfigMaps and Deployments labelled as the suite's on each
// member until ctx ends, and returns once every informer has listed.
func startTracker(ctx context.Context, clients map[string]dynamic.Interface) (*tracker, error) {
	tr := &tracker{uids: map[string]types.UID{}}
	var synced []cache.InformerSynced
	for member, c := range clients {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
			o.LabelSelector = suiteLabel + "=true"
		})
		for _, g := range []schema.GroupVersionResource{namespacesGVR, configMapsGVR, deploymentsGVR} {
			inf := f.ForResource(g).Informer()
			prefix := member + "/" + g.Resource + "/"
			_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { tr.seen(prefix, obj) },
				UpdateFunc: func(_, obj any) { tr.seen(prefix, obj) },
				DeleteFunc: func(obj any) { tr.gone(prefix, obj) },
			})
			if err != nil {
				return nil, fmt.Errorf("watch %s on %s: %w", g.Resource, member, err)
			}
			synced = append(synced, inf.HasSynced)
		}
		f.Start(ctx.Done())
	}
	syncCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), synced...) {
		return nil, fmt.Errorf("the members' objects were not listed within 5 minutes")
	}
	return tr, nil
}

func key(prefix string, u *unstructured.Unstructured) string {
	return prefix + u.GetNamespace() + "/" + u.GetName()
}

func (tr *tracker) seen(prefix string, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	k := key(prefix, u)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	first, ok := tr.uids[k]
	switch {
	case !ok:
		tr.uids[k] = u.GetUID()
	case first != u.GetUID():
		tr.recreate = append(tr.recreate, fmt.Sprintf("%s (uid %s, was %s)", k, u.GetUID(), first))
		tr.uids[k] = u.GetUID()
	}
}

func (tr *tracker) gone(prefix string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.deleted = append(tr.deleted, key(prefix, u))
}

// changes is what the tracker has seen so far: objects deleted and objects re-created.
type changes struct{ deleted, recreated []string }

func (tr *tracker) changes() changes {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return changes{slices.Clone(tr.deleted), slices.Clone(tr.recreate)}
}

// since is what was seen after before.
func (c changes) since(before changes) changes {
	return changes{c.deleted[len(before.deleted):], c.recreated[len(before.recreated):]}
}

// objects is how many objects the tracker knows.
func (tr *tracker) objects() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.uids)
}
