package quickstart

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// existingObject is a member object created before the placement, as it was then.
type existingObject struct {
	resource    *unstructured.Unstructured
	generation  int64
	uid         string
	replicaSets []string // for a Deployment: its ReplicaSets; the same ones later mean no restart
	earlier     bool     // it was there already, from an earlier run
}

// createExisting creates the objects in dir's files directly on member, with client-go, as
// if they had been running there before Flotilla. Objects already there are left alone.
func (e Env) createExisting(ctx context.Context, dir, member string) ([]existingObject, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, err
	}
	rc := e.RESTConfig(member)
	if rc == nil {
		return nil, fmt.Errorf("the example needs the local member %s", member)
	}
	c, mapper, err := clients(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", member, err)
	}
	done := e.Step(fmt.Sprintf("Creating a pre-existing workload directly on %s (%s), as if it ran there before Flotilla", member, e.Rel(dir)))
	var out []existingObject
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			done("failed")
			return nil, err
		}
		for _, d := range docs {
			u, ok := d.Object.(*unstructured.Unstructured)
			if !ok {
				done("failed")
				return nil, fmt.Errorf("%s: a %T is not a Kubernetes object for a member", f, d.Object)
			}
			obj, err := createOnMember(ctx, c, mapper, u)
			if err != nil {
				done("failed")
				return nil, fmt.Errorf("create %s on %s: %w", objectName(u), member, err)
			}
			out = append(out, *obj)
			switch {
			case obj.earlier:
				e.Linef("%s is already there (from an earlier run)", objectName(u))
			case obj.generation != 0:
				e.Linef("created %s (generation %d)", objectName(u), obj.generation)
			default:
				e.Linef("created %s", objectName(u))
			}
		}
	}
	for i := range out {
		if out[i].resource.GetKind() == "Deployment" {
			out[i].replicaSets = replicaSetsOf(ctx, c, out[i].resource, true)
		}
	}
	done("done")
	return out, nil
}

func clients(rc *rest.Config) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return c, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

func resourceFor(c dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == "namespace" {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return c.Resource(m.Resource).Namespace(ns), nil
	}
	return c.Resource(m.Resource), nil
}

func createOnMember(ctx context.Context, c dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) (*existingObject, error) {
	ri, err := resourceFor(c, mapper, u)
	if err != nil {
		return nil, err
	}
	got, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: "quickstart-before-flotilla"})
	earlier := apierrors.IsAlreadyExists(err)
	if earlier {
		got, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return &existingObject{resource: got, generation: got.GetGeneration(), uid: string(got.GetUID()), earlier: earlier}, nil
}

// replicaSetsOf lists the ReplicaSets a Deployment owns; wait gives the deployment controller
// a little time to make the first one.
func replicaSetsOf(ctx context.Context, c dynamic.Interface, deploy *unstructured.Unstructured, wait bool) []string {
	rs := c.Resource(replicaSetsGVR).Namespace(deploy.GetNamespace())
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := rs.List(ctx, metav1.ListOptions{})
		var names []string
		if err == nil {
			for _, item := range list.Items {
				for _, ref := range item.GetOwnerReferences() {
					if ref.UID == deploy.GetUID() {
						names = append(names, item.GetName())
					}
				}
			}
		}
		if len(names) > 0 || !wait || time.Now().After(deadline) || ctx.Err() != nil {
			slices.Sort(names)
			return names
		}
		time.Sleep(pollEvery)
	}
}

func objectName(u *unstructured.Unstructured) string {
	s := u.GetKind() + " "
	if ns := u.GetNamespace(); ns != "" {
		s += ns + "/"
	}
	return s + u.GetName()
}

// reportTakeovers prints what happened to the pre-existing workload: the takeover decisions
// the apply worker recorded, and whether the Deployment was restarted.
func (e Env) reportTakeovers(ctx context.Context, placement string, existing []existingObject) {
	takeovers, err := e.Status.Takeovers(ctx, events.TakeoverQuery{Placement: placement})
	if err != nil {
		e.Linef("takeover decisions: %v", err)
	}
	if len(takeovers) > 0 {
		e.Printf("==> Takeover decisions (fleetctl takeovers --placement %s)\n", placement)
		for _, t := range takeovers {
			e.Linef("%s  %s: %s (whenToTakeOver %s, %s)", t.Cluster, printer.Resource(t.Resource), t.Outcome, t.Mode, t.Comparison)
		}
	}
	rc := e.RESTConfig(existingMember)
	if rc == nil {
		return
	}
	c, _, err := clients(rc)
	if err != nil {
		return
	}
	for _, x := range existing {
		if x.resource.GetKind() != "Deployment" || x.earlier {
			continue
		}
		now, err := c.Resource(deploymentsGVR).Namespace(x.resource.GetNamespace()).Get(ctx, x.resource.GetName(), metav1.GetOptions{})
		if err != nil {
			continue
		}
		rs := replicaSetsOf(ctx, c, now, false)
		restarted := now.GetGeneration() != x.generation || string(now.GetUID()) != x.uid || !slices.Equal(rs, x.replicaSets)
		if restarted {
			e.Linef("%s on %s changed when it was taken over: generation %d -> %d, ReplicaSets %v -> %v",
				objectName(now), existingMember, x.generation, now.GetGeneration(), x.replicaSets, rs)
			continue
		}
		e.Linef("%s on %s was taken over without a restart: generation %d before and after, same ReplicaSet (%s)",
			objectName(now), existingMember, now.GetGeneration(), strings.Join(rs, ", "))
	}
}
