package selection_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

const fuzzHub = `[
	{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-2","labels":{"app":"web-2"}}},
	{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}},
	{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web-2","labels":{"kubeadmiral.io/propagation-policy-name":"pp"}}},
	{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt","namespace":"web-2"}},
	{"apiVersion":"v1","kind":"Secret","metadata":{"name":"t","namespace":"web-2"},"type":"kubernetes.io/service-account-token"},
	{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-5b56","namespace":"web-2","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u1","controller":true}]}},
	{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader","labels":{"tier":"read"}}},
	{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"other"}}
]`

// fuzzStore reads fuzz input as hub manifests (a JSON array, else one
// manifest), keeping those selection can read.
func fuzzStore(t *testing.T, data []byte) selection.Objects {
	t.Helper()
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		raws = []json.RawMessage{data}
	}
	var store selection.Objects
	seen := map[string]bool{}
	for _, raw := range raws {
		o, err := selection.NewObject(raw)
		if err != nil {
			if o.ID != (api.ResourceIdentifier{}) || o.Manifest != nil {
				t.Fatalf("NewObject returned %+v and error %v", o, err)
			}
			continue
		}
		if o.ID.Name == "" || o.ID.Kind == "" || o.ID.Version == "" && !strings.HasSuffix(o.ID.Group, "/") {
			t.Fatalf("NewObject read %+v from %s", o.ID, raw)
		}
		if k := selection.Key(o.ID); !seen[k] { // the hub store holds one object per identity
			seen[k] = true
			store = append(store, o)
		}
	}
	return store
}

// fuzzSelectors reads fuzz input as resource selectors: a JSON array, else
// one selector.
func fuzzSelectors(data []byte) []api.ClusterResourceSelector {
	var sels []api.ClusterResourceSelector
	if err := json.Unmarshal(data, &sels); err == nil {
		return sels
	}
	var one api.ClusterResourceSelector
	if err := json.Unmarshal(data, &one); err == nil {
		return []api.ClusterResourceSelector{one}
	}
	return nil
}

// FuzzSelect selects with arbitrary selectors (label selectors included)
// from a hub store of arbitrary manifests. A selection either fails with a
// problem per bad selector, naming it, or returns objects of the store, each
// once, ordered by key, each picked by a selector (directly, by kind, name
// and labels, or as the contents of a selected Namespace), and each one a
// change to which MayConcern the selectors, so that a change to it triggers
// a new selection. The order of the store does not matter.
func FuzzSelect(f *testing.F) {
	for _, s := range []string{
		`[{"group":"","version":"v1","kind":"Namespace","labelSelector":{"matchLabels":{"app":"web-2"}}}]`,
		`[{"group":"","version":"v1","kind":"Namespace","name":"other"},{"group":"rbac.authorization.k8s.io","version":"v1","kind":"ClusterRole","labelSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["read","write"]}]}}]`,
		`[{"group":"apps","version":"v1","kind":"Deployment","labelSelector":{"matchLabels":{"flotilla.dev/namespace":"web-2"},"matchExpressions":[{"key":"kubeadmiral.io/propagation-policy-name","operator":"Exists"}]}}]`,
		`[{"group":"example.com","version":"v1","kind":"Widget"}]`,
		`[{"group":"apps","version":"v1","kind":"Deployment"},{"group":"","version":"v1","kind":"Namespace","name":"x","labelSelector":{}}]`,
		`[{"group":"","version":"v1","kind":"Namespace","labelSelector":{"matchExpressions":[{"key":"a b","operator":"Gt","values":["1"]}]}}]`,
	} {
		f.Add([]byte(fuzzHub), []byte(s))
	}
	f.Fuzz(func(t *testing.T, hub, selectorData []byte) {
		if len(hub)+len(selectorData) > 64<<10 {
			return
		}
		store := fuzzStore(t, hub)
		selectors := fuzzSelectors(selectorData)
		ctx := context.Background()
		got, err := selection.Select(ctx, "", selectors, store)
		reversed := slices.Clone(store)
		slices.Reverse(reversed)
		again, err2 := selection.Select(ctx, "", selectors, reversed)
		if fmt.Sprint(err) != fmt.Sprint(err2) || keysOf(got) != keysOf(again) {
			t.Fatalf("the store's order matters: %s, %v; reversed %s, %v", keysOf(got), err, keysOf(again), err2)
		}
		if err != nil {
			var invalid *selection.InvalidError
			if !errors.As(err, &invalid) || len(invalid.Problems) == 0 || got != nil {
				t.Fatalf("Select = %d objects, %v; want nothing and an *InvalidError with problems", len(got), err)
			}
			for _, p := range invalid.Problems {
				if !strings.HasPrefix(p, "resourceSelectors[") {
					t.Fatalf("problem %q does not name its selector", p)
				}
			}
			return
		}
		inStore := map[string]selection.Object{}
		for _, o := range store {
			inStore[selection.Key(o.ID)] = o
		}
		picked := map[string]bool{}
		for i, o := range got {
			k := selection.Key(o.ID)
			if i > 0 && selection.Key(got[i-1].ID) >= k {
				t.Fatalf("selection not ordered by key or not unique: %s", keysOf(got))
			}
			if _, ok := inStore[k]; !ok {
				t.Fatalf("selected %s, which is not in the store", k)
			}
			picked[k] = true
		}
		for _, o := range got {
			if !pickedBy(selectors, o, picked) {
				t.Fatalf("no selector picks %s (selected %s)", selection.Key(o.ID), keysOf(got))
			}
			if !selection.MayConcern(selectors, o.ID) {
				t.Fatalf("MayConcern(%s) = false for a selected object", selection.Key(o.ID))
			}
		}
	})
}

func keysOf(objs []selection.Object) string {
	ks := make([]string, 0, len(objs))
	for _, o := range objs {
		ks = append(ks, selection.Key(o.ID))
	}
	return strings.Join(ks, " ")
}

// pickedBy reports whether a selector picks o: directly, or as the content of
// a selected Namespace.
func pickedBy(selectors []api.ClusterResourceSelector, o selection.Object, picked map[string]bool) bool {
	for _, s := range selectors {
		if s.Group == o.ID.Group && s.Version == o.ID.Version && s.Kind == o.ID.Kind && (s.Name == "" || s.Name == o.ID.Name) {
			set := labels.Set(o.Labels)
			if sel := s.LabelSelector; sel != nil && namesNamespaceLabel(sel) {
				set = labels.Merge(set, labels.Set{selection.NamespaceLabel: o.ID.Namespace})
			}
			if s.LabelSelector == nil {
				return true
			}
			if sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector); err == nil && sel.Matches(set) {
				return true
			}
		}
		if o.ID.Namespace != "" && s.Group == "" && s.Kind == "Namespace" &&
			picked[selection.Key(api.ResourceIdentifier{Version: s.Version, Kind: "Namespace", Name: o.ID.Namespace})] {
			return true
		}
	}
	return false
}

func namesNamespaceLabel(sel *metav1.LabelSelector) bool {
	if _, ok := sel.MatchLabels[selection.NamespaceLabel]; ok {
		return true
	}
	for _, r := range sel.MatchExpressions {
		if r.Key == selection.NamespaceLabel {
			return true
		}
	}
	return false
}

// FuzzHubManifest runs an arbitrary manifest through what the rollout's hub
// store checks before it stores one (hub.go: a JSON object, stripped of
// server fields, a valid hub resource with a name, canonical JSON that
// selection reads): what is stored, selection reads with the identity the
// store keys it by and the labels the object carries.
func FuzzHubManifest(f *testing.F) {
	var seeds []json.RawMessage
	if err := json.Unmarshal([]byte(fuzzHub), &seeds); err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","labels":{"a":"b"},"uid":"1"},"status":{}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"app","labels":{"replicas":3}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(data, &u.Object); err != nil || u.Object == nil {
			return
		}
		api.StripServerFields(u)
		if errs := api.ValidateHubResource(u); len(errs) > 0 || u.GetName() == "" {
			return
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := snapshot.Canonical(raw)
		if err != nil {
			t.Fatalf("canonical form of an accepted manifest: %v", err)
		}
		o, err := selection.NewObject(stored)
		if err != nil {
			return // refused by the hub store (hub.go)
		}
		gvk := u.GroupVersionKind()
		want := api.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
		if o.ID != want {
			t.Fatalf("selection reads %+v, the hub store keys it as %+v", o.ID, want)
		}
		if got, want := labels.Set(o.Labels).String(), labels.Set(u.GetLabels()).String(); got != want {
			t.Fatalf("selection reads labels %q, the object carries %q", got, want)
		}
	})
}
