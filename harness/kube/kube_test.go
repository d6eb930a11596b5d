package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

var (
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

func apply(t *testing.T, c dynamic.Interface, gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: obj}
	var ri dynamic.ResourceInterface = c.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		ri = c.Resource(gvr).Namespace(ns)
	}
	out, err := ri.Apply(t.Context(), u.GetName(), u, metav1.ApplyOptions{FieldManager: "flotilla-harness-test", Force: true})
	if err != nil {
		t.Fatalf("apply %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	return out
}

func TestMembersAreRealIsolatedClusters(t *testing.T) {
	env := kube.StartT(t, 2)
	members := env.Members()
	if len(members) != 2 {
		t.Fatalf("members = %v, want 2", members)
	}
	for _, m := range members {
		t.Logf("%s: API server ready in %s, kubeconfig %s", m, env.ReadyTime(m), env.Kubeconfig(m))
	}

	clients := map[string]dynamic.Interface{}
	for _, m := range members {
		// Through the kubeconfig file, as an apply worker would be configured.
		rc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig(m))
		if err != nil {
			t.Fatal(err)
		}
		c, err := dynamic.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		clients[m] = c

		dc, err := discovery.NewDiscoveryClientForConfig(env.RESTConfig(m))
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != kube.KubeVersion {
			t.Errorf("%s reports version %s, want %s", m, v.GitVersion, kube.KubeVersion)
		}
	}

	for _, m := range members {
		c := clients[m]
		apply(t, c, namespaces, map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "shop"},
		})
		apply(t, c, configMaps, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "settings", "namespace": "shop"},
			"data":     map[string]any{"cluster": m},
		})
		got, err := c.Resource(configMaps).Namespace("shop").Get(t.Context(), "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: read back: %v", m, err)
		}
		t.Logf("applied Namespace shop and ConfigMap shop/settings to %s with server-side apply (uid %s)", m, got.GetUID())
		if v, _, _ := unstructured.NestedString(got.Object, "data", "cluster"); v != m {
			t.Errorf("%s: configmap data.cluster = %q, want %q", m, v, m)
		}
	}

	t.Run("isolation", func(t *testing.T) {
		apply(t, clients["member-1"], configMaps, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "only-on-member-1", "namespace": "shop"},
		})
		_, err := clients["member-2"].Resource(configMaps).Namespace("shop").Get(t.Context(), "only-on-member-1", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("an object created in member-1 is visible in member-2 (err %v)", err)
		}
		got, err := clients["member-2"].Resource(configMaps).Namespace("shop").Get(t.Context(), "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "data", "cluster"); v != "member-2" {
			t.Fatalf("member-2 sees member-1's write: data.cluster = %q", v)
		}
	})

	t.Run("deployment controller reports status", func(t *testing.T) {
		c := clients["member-1"]
		apply(t, c, deployments, map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "shop"},
			"spec": map[string]any{
				"replicas": int64(0),
				"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
					"spec": map[string]any{"containers": []any{
						map[string]any{"name": "web", "image": "nginx:1.27"},
					}},
				},
			},
		})
		poll.Every(t, 100*time.Millisecond, time.Minute, "deployment web Available", func() error {
			d, err := c.Resource(deployments).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Available" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", conds)
		})
	})

	t.Run("namespace deletion completes", func(t *testing.T) {
		for _, m := range members {
			c := clients[m]
			if err := c.Resource(namespaces).Delete(t.Context(), "shop", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("%s: delete namespace: %v", m, err)
			}
			poll.Every(t, 100*time.Millisecond, time.Minute, m+": namespace shop gone", func() error {
				ns, err := c.Resource(namespaces).Get(t.Context(), "shop", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase")
				return fmt.Errorf("still there, phase %s", phase)
			})
		}
	})
}

func TestStopKillsEverything(t *testing.T) {
	env, err := kube.Start(t.Context(), kube.Options{N: 1, NoControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("member-1 ready in %s", env.ReadyTime("member-1"))
	dc, err := discovery.NewDiscoveryClientForConfig(env.RESTConfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		t.Fatal(err)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	rc := env.RESTConfig("member-1")
	rc.Timeout = 5 * time.Second
	dc, err = discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err == nil {
		t.Fatal("the API server still answers after Stop")
	}
	if err := env.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinariesSayHowToBuildThem(t *testing.T) {
	t.Setenv(kube.EnvBinDir, "")
	t.Setenv("FLOTILLA_CACHE", t.TempDir())
	_, err := kube.BinDir()
	if err == nil {
		t.Fatal("an empty cache was accepted")
	}
	if !strings.Contains(err.Error(), "make kube-bins") {
		t.Errorf("error %q does not say to run make kube-bins", err)
	}
	_, err = kube.Start(t.Context(), kube.Options{})
	if err == nil || !strings.Contains(err.Error(), "make kube-bins") {
		t.Errorf("Start without binaries: %v", err)
	}
}

func TestDataDirBringsTheSameClustersBack(t *testing.T) {
	dir := t.TempDir()
	start := func() *kube.Env {
		t.Helper()
		env, err := kube.Start(t.Context(), kube.Options{DataDir: dir, Members: []string{"member-1"}, NoControllerManager: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { env.Stop() })
		return env
	}
	env := start()
	t.Logf("member-1 ready in %s", env.ReadyTime("member-1"))
	kubeconfig, err := os.ReadFile(env.Kubeconfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	client := func(t *testing.T) dynamic.Interface {
		// The kubeconfig as it was written by the first start: a user's copy of it must
		// keep working.
		rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dynamic.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	apply(t, client(t), namespaces, map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"},
	})
	created := apply(t, client(t), configMaps, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": "shop"},
		"data":     map[string]any{"color": "blue"},
	})
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member-1", "certs", "apiserver.crt")); err != nil {
		t.Fatalf("Stop removed the data dir: %v", err)
	}

	env = start()
	t.Logf("member-1 back in %s", env.ReadyTime("member-1"))
	got, err := client(t).Resource(configMaps).Namespace("shop").Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the kubeconfig written before the restart no longer reaches the member's data: %v", err)
	}
	if got.GetUID() != created.GetUID() {
		t.Fatalf("configmap uid %s after the restart, %s before: not the same object", got.GetUID(), created.GetUID())
	}
	now, err := os.ReadFile(env.Kubeconfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	if string(now) != string(kubeconfig) {
		t.Errorf("the kubeconfig changed across the restart:\n%s\nwas\n%s", now, kubeconfig)
	}
}

func TestSimulatedNodeMakesDeploymentsAvailable(t *testing.T) {
	env := kube.StartT(t, 1)
	rc := env.RESTConfig("member-1")
	nodeDone := make(chan error, 1)
	ctx, stop := context.WithCancel(t.Context())
	go func() { nodeDone <- kube.SimulatedNode{Name: "node-1"}.Run(ctx, rc) }()
	t.Cleanup(func() {
		stop()
		if err := <-nodeDone; err != nil {
			t.Errorf("simulated node: %v", err)
		}
	})
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, c, namespaces, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}})
	apply(t, c, deployments, map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27"}}},
			},
		},
	})
	poll.Every(t, 100*time.Millisecond, time.Minute, "deployment web with 2 available replicas", func() error {
		d, err := c.Resource(deployments).Namespace("shop").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas"); n != 2 {
			return fmt.Errorf("%d available replicas", n)
		}
		return nil
	})
	pods, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("shop").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName")
		phase, _, _ := unstructured.NestedString(p.Object, "status", "phase")
		if node != "node-1" || phase != "Running" {
			t.Errorf("pod %s: node %q, phase %q; want node-1, Running", p.GetName(), node, phase)
		}
	}

	// Bound pods are deleted gracefully: without someone to finish that, the namespace would
	// never go away.
	if err := c.Resource(namespaces).Delete(t.Context(), "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Every(t, 100*time.Millisecond, time.Minute, "namespace shop gone", func() error {
		_, err := c.Resource(namespaces).Get(t.Context(), "shop", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// TestAPIServerGoesDownAndComesBack: a member whose API server is stopped refuses clients;
// started again it answers at the same address, to the same kubeconfig, with its objects as
// they were (the same UID), and a second start is refused.
func TestAPIServerGoesDownAndComesBack(t *testing.T) {
	env := kube.StartTWith(t, kube.Options{N: 1, NoControllerManager: true})
	kubeconfig := env.Kubeconfig("member-1")
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.Timeout = 10 * time.Second
	c := dynamic.NewForConfigOrDie(rc)
	before := apply(t, c, configMaps, map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kept", "namespace": "default"},
		"data":     map[string]any{"k": "v"},
	})

	if err := env.StopAPIServer("member-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resource(configMaps).Namespace("default").Get(t.Context(), "kept", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	if err := env.StartAPIServer(t.Context(), "member-1"); err != nil {
		t.Fatal(err)
	}
	if err := env.StartAPIServer(t.Context(), "member-1"); err == nil {
		t.Error("a second StartAPIServer of a running API server was accepted")
	}
	// The same kubeconfig file, read again: same address, same serving certificate.
	rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	after, err := dynamic.NewForConfigOrDie(rc).Resource(configMaps).Namespace("default").Get(t.Context(), "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after the restart, with the kubeconfig of before: %v", err)
	}
	if after.GetUID() != before.GetUID() {
		t.Errorf("the ConfigMap came back as another object: uid %s, was %s", after.GetUID(), before.GetUID())
	}
}
