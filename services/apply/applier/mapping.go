package applier

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

// ErrUnreachable reports that the member's API server could not be reached.
var ErrUnreachable = errors.New("member cluster is unreachable")

// unreachable reports whether err means the API server was not reached at
// all (as opposed to an answer refusing the request).
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrUnreachable) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false // the server answered
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, context.DeadlineExceeded)
}

// Probe checks that the member's API server answers; the error wraps ErrUnreachable when
// it was not reached.
func (a *Applier) Probe(ctx context.Context) error { return a.probe(ctx) }

// probe checks that the member answers, refreshing discovery when it had
// failed before.
func (a *Applier) probe(ctx context.Context) error {
	// ServerVersion is one small uncached request.
	if _, err := a.disc.ServerVersion(); err != nil {
		if unreachable(err) {
			return fmt.Errorf("%w: %v", ErrUnreachable, err)
		}
		return fmt.Errorf("probe member %s: %w", a.cluster, err)
	}
	return ctx.Err()
}

// mapping resolves the resource of a kind on the member. When the kind is
// unknown it refreshes discovery once (a CRD may just have been created).
func (a *Applier) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the member cluster does not serve %s", gvk)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// resolve fills in a tracked object's resource and fixes its namespace for
// the resource's scope. It returns an error the object fails with.
func (a *Applier) resolve(t *tracked) error {
	m, err := a.mapping(t.obj.GroupVersionKind())
	if err != nil {
		return err
	}
	t.gvr = m.Resource
	t.namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	t.mapped = true
	u := t.obj.Object
	env := t.obj.Resource.Envelope
	switch {
	case t.namespaced && u.GetNamespace() == "":
		u.SetNamespace(metav1.NamespaceDefault)
		t.obj.Resource.Namespace = metav1.NamespaceDefault
	case !t.namespaced && u.GetNamespace() != "":
		u.SetNamespace("")
		t.obj.Resource.Namespace = ""
	}
	if env != nil {
		switch {
		case env.Type == api.ClusterResourceEnvelopeType && t.namespaced:
			return fmt.Errorf("ClusterResourceEnvelope %s may only hold cluster-scoped objects, and %s is namespaced", env.Name, t.obj.Resource.Kind)
		case env.Type == api.ResourceEnvelopeType && !t.namespaced:
			return fmt.Errorf("ResourceEnvelope %s/%s may only hold namespaced objects, and %s is cluster-scoped", env.Namespace, env.Name, t.obj.Resource.Kind)
		}
	}
	return nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// waitForCRDs waits (bounded) until the applied CRDs are established, so
// that custom resources in later waves can be mapped and applied.
func (a *Applier) waitForCRDs(ctx context.Context, crds []*tracked) {
	if len(crds) == 0 {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, t := range crds {
		for time.Now().Before(deadline) {
			u, err := a.dyn.Resource(crdGVR).Get(ctx, t.obj.Object.GetName(), metav1.GetOptions{})
			if err == nil && crdEstablished(u) {
				t.live = u
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	a.mapper.Reset()
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
