package applier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/internal/applytest"
)

// One member cluster (etcd, kube-apiserver, kube-controller-manager) serves
// every test of the package; tests keep apart by namespace and object names.
var members *kube.Env

const member = "member-1"

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	env, err := kube.Start(ctx, kube.Options{N: 1})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	members = env
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func newApplier(t testing.TB) *applier.Applier {
	t.Helper()
	a, err := applier.New(members.RESTConfig(member), applier.Options{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// client is a plain dynamic client, standing in for a user with kubectl.
func client(t testing.TB) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(members.RESTConfig(member))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// name derives a DNS label from the test's name, so tests do not collide.
func name(t testing.TB, suffix string) string { return applytest.Name(t, suffix) }

// work builds a placement's desired state from YAML manifests.
func work(t testing.TB, placement string, strategy api.ApplyStrategy, manifests ...string) *events.WorkDesired {
	t.Helper()
	return applytest.Work(t, member, placement, strategy, manifests...)
}

func gvrOf(t testing.TB, u *unstructured.Unstructured) schema.GroupVersionResource {
	t.Helper()
	gvk := u.GroupVersionKind()
	switch gvk.Kind {
	case "Namespace", "ConfigMap", "Service", "Secret", "ResourceQuota", "ServiceAccount":
		return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
	case "Deployment":
		return gvk.GroupVersion().WithResource("deployments")
	case "MutatingWebhookConfiguration":
		return gvk.GroupVersion().WithResource("mutatingwebhookconfigurations")
	case "CustomResourceDefinition":
		return gvk.GroupVersion().WithResource("customresourcedefinitions")
	}
	t.Fatalf("no resource known for %s", gvk)
	return schema.GroupVersionResource{}
}

// create makes an object on the member as a user would with kubectl, before
// Flotilla knows of it.
func create(t testing.TB, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := applytest.Object(t, manifest)
	r := client(t).Resource(gvrOf(t, u)).Namespace(u.GetNamespace())
	created, err := r.Create(t.Context(), u, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	if err != nil {
		t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return created
}

// get reads a member object; nil when it does not exist.
func get(t testing.TB, gvr schema.GroupVersionResource, ns, n string) *unstructured.Unstructured {
	t.Helper()
	u, err := client(t).Resource(gvr).Namespace(ns).Get(t.Context(), n, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var (
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	quotas      = schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}
	webhooks    = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
)

// result finds the result of one object in a report.
func result(t testing.TB, r *events.WorkReported, kind, n string) events.ManifestResult {
	t.Helper()
	for _, m := range r.Manifests {
		if m.Resource.Kind == kind && m.Resource.Name == n {
			return m
		}
	}
	t.Fatalf("no result for %s %s in report: %s", kind, n, dump(r))
	return events.ManifestResult{}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func label(u *unstructured.Unstructured, k string) string {
	return u.GetLabels()[k]
}

func nested(t testing.TB, u *unstructured.Unstructured, fields ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// hasValue reports whether the JSON pointer path in u holds want (as a
// PatchDetail renders it).
func hasValue(t testing.TB, u *unstructured.Unstructured, path, want string) bool {
	t.Helper()
	var cur any = u.Object
	for _, tok := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i >= len(c) {
				return false
			}
			cur = c[i]
		default:
			return false
		}
	}
	if s, ok := cur.(string); ok {
		return s == want
	}
	b, _ := json.Marshal(cur)
	return string(b) == want
}

// timeout bounds waits for controllers on a busy machine; a wait asks the
// member's API server again every step.
const (
	timeout = 60 * time.Second
	step    = 50 * time.Millisecond
)

var deleteNow = metav1.DeleteOptions{}
