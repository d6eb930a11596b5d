package hubsync

import (
	"context"
	"errors"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
)

// selectResources returns the hub resources some placement selects, by the rollout's own
// rules (package selection), judged on the objects as they would be published.
func selectResources(ctx context.Context, placements []*api.ClusterResourcePlacement, resources []converted) ([]converted, error) {
	store := newMemStore(resources)
	picked := map[string]bool{}
	for _, p := range placements {
		ns, _ := api.SplitPlacementKey(api.InternalPlacement(p).Name)
		objs, err := selection.Select(ctx, ns, p.Spec.ResourceSelectors, store)
		var invalid *selection.InvalidError
		if errors.As(err, &invalid) {
			// The placement's status says so (InvalidResourceSelectors); its other
			// selectors are judged one by one so that what they select is published.
			objs = selectEach(ctx, ns, p.Spec.ResourceSelectors, store)
		} else if err != nil {
			return nil, err
		}
		for _, o := range objs {
			picked[selection.Key(o.ID)] = true
		}
	}
	var out []converted
	for _, c := range resources {
		if picked[selection.Key(c.object.ID)] {
			out = append(out, c)
		}
	}
	return out, nil
}

func selectEach(ctx context.Context, namespace string, selectors []api.ClusterResourceSelector, store selection.Store) []selection.Object {
	var out []selection.Object
	for _, s := range selectors {
		objs, err := selection.Select(ctx, namespace, []api.ClusterResourceSelector{s}, store)
		if err == nil {
			out = append(out, objs...)
		}
	}
	return out
}

// memStore is the hub's resources as selection.Store.
type memStore struct {
	byKind      map[[3]string][]selection.Object // group, version, kind
	byNamespace map[string][]selection.Object
}

func newMemStore(resources []converted) *memStore {
	s := &memStore{byKind: map[[3]string][]selection.Object{}, byNamespace: map[string][]selection.Object{}}
	for _, c := range resources {
		id := c.object.ID
		k := [3]string{id.Group, id.Version, id.Kind}
		s.byKind[k] = append(s.byKind[k], c.object)
		if id.Namespace != "" {
			s.byNamespace[id.Namespace] = append(s.byNamespace[id.Namespace], c.object)
		}
	}
	return s
}

func (s *memStore) ByKind(_ context.Context, group, version, kind, name string) ([]selection.Object, error) {
	all := s.byKind[[3]string{group, version, kind}]
	if name == "" {
		return all, nil
	}
	var out []selection.Object
	for _, o := range all {
		if o.ID.Name == name {
			out = append(out, o)
		}
	}
	return out, nil
}

func (s *memStore) InNamespace(_ context.Context, namespace string) ([]selection.Object, error) {
	return s.byNamespace[namespace], nil
}
