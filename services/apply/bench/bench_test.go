// Package bench measures the apply worker against kubectl: one placement of
// 500 objects (namespaces, config maps, deployments, services) applied to a
// fresh member, beside `kubectl apply --server-side -f` of the same objects
// against the same API server.
//
//	FLOTILLA_KUBE_BIN_DIR=$(bash hack/kube-bins.sh) go test ./services/apply/bench -run '^$' -bench . -benchtime 3x
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// Shape of the placement: 20 namespaces, each with 8 config maps, 8
// deployments and 8 services: 20 + 20*24 = 500 objects.
const (
	namespaces   = 20
	perKind      = 8
	totalObjects = namespaces + namespaces*3*perKind
)

// manifests renders the placement's objects as YAML documents, namespaces
// first (kubectl applies in file order), names prefixed so that runs do not
// meet.
func manifests(prefix string) []string {
	var docs []string
	for n := range namespaces {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s-ns-%d\n  labels: {app: bench}\n", prefix, n))
	}
	for n := range namespaces {
		ns := fmt.Sprintf("%s-ns-%d", prefix, n)
		for i := range perKind {
			docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: config-%[2]d, namespace: %[1]s, labels: {app: web-%[2]d}}
data:
  app.properties: |
    color=blue
    replicas=%[2]d
  owner: team-%[2]d
`, ns, i))
			docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web-%[2]d, namespace: %[1]s, labels: {app: web-%[2]d}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web-%[2]d}}
  template:
    metadata: {labels: {app: web-%[2]d}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
        envFrom: [{configMapRef: {name: config-%[2]d}}]
        resources: {requests: {cpu: 100m, memory: 64Mi}}
`, ns, i))
			docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web-%[2]d, namespace: %[1]s, labels: {app: web-%[2]d}}
spec:
  selector: {app: web-%[2]d}
  ports: [{port: 80, targetPort: 80, protocol: TCP}]
`, ns, i))
		}
	}
	return docs
}

// freeServiceIPs deletes the services of a run.
func freeServiceIPs(b *testing.B, cfg *rest.Config, prefix string) {
	b.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	svc := schema.GroupVersionResource{Version: "v1", Resource: "services"}
	for n := range namespaces {
		ns := fmt.Sprintf("%s-ns-%d", prefix, n)
		for i := range perKind {
			err := dyn.Resource(svc).Namespace(ns).Delete(context.Background(), fmt.Sprintf("web-%d", i), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				b.Fatal(err)
			}
		}
	}
}

func desired(b *testing.B, cluster, placement string, docs []string) *events.WorkDesired {
	b.Helper()
	w := &events.WorkDesired{Cluster: cluster, Placement: placement, ResourceIndex: 1, Generation: 1, UnavailablePeriodSeconds: 60,
		ApplyStrategy: api.ApplyStrategy{Type: api.ApplyStrategyTypeServerSideApply}}
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			b.Fatal(err)
		}
		w.Manifests = append(w.Manifests, json.RawMessage(j))
	}
	return w
}

// BenchmarkApply500 applies 500 objects to a fresh member with the apply
// worker's applier and with kubectl, and reports both rates and their ratio.
func BenchmarkApply500(b *testing.B) {
	binDir, err := kube.BinDir()
	if err != nil {
		b.Fatal(err)
	}
	kubectl := filepath.Join(binDir, "kubectl")
	// The API server alone: no controllers compete for the machine.
	env := kube.StartTWith(b, kube.Options{N: 1, NoControllerManager: true})
	const member = "member-1"
	kubeconfig := env.Kubeconfig(member)
	cacheDir := b.TempDir()
	run := func(args ...string) error {
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cacheDir}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	// Warm kubectl's discovery cache, so that it is measured applying.
	if err := run("api-resources"); err != nil {
		b.Fatal(err)
	}

	var flotilla, kubectlTime time.Duration
	iter := 0
	for b.Loop() {
		iter++
		// kubectl, on its own fresh objects.
		b.StopTimer()
		file := filepath.Join(b.TempDir(), "objects.yaml")
		if err := os.WriteFile(file, []byte(strings.Join(manifests(fmt.Sprintf("k%d", iter)), "---\n")), 0o600); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := run("apply", "--server-side", "--field-manager", "bench-kubectl", "-f", file); err != nil {
			b.Fatal(err)
		}
		kubectlTime += time.Since(start)
		freeServiceIPs(b, env.RESTConfig(member), fmt.Sprintf("k%d", iter))
		w := desired(b, member, fmt.Sprintf("bench-%d", iter), manifests(fmt.Sprintf("f%d", iter)))
		b.StartTimer()

		// The apply worker's applier, cold: a new one per run, so its
		// discovery is measured too.
		start = time.Now()
		a, err := applier.New(env.RESTConfig(member), applier.Options{Cluster: member})
		if err != nil {
			b.Fatal(err)
		}
		report, err := a.Apply(context.Background(), w)
		if err != nil {
			b.Fatal(err)
		}
		flotilla += time.Since(start)
		b.StopTimer()
		// The harness's service range is a /24: free the cluster IPs of
		// both runs for the next iteration.
		freeServiceIPs(b, env.RESTConfig(member), fmt.Sprintf("f%d", iter))
		b.StartTimer()
		if report.Applied.Status != "True" || len(report.Manifests) != totalObjects {
			for _, m := range report.Manifests {
				if m.Applied.Status != "True" {
					b.Logf("%s %s/%s: %s", m.Resource.Kind, m.Resource.Namespace, m.Resource.Name, m.Applied.Message)
					break
				}
			}
			b.Fatalf("apply failed: %s %s (%d results)", report.Applied.Reason, report.Applied.Message, len(report.Manifests))
		}
	}
	fRate := float64(totalObjects*iter) / flotilla.Seconds()
	kRate := float64(totalObjects*iter) / kubectlTime.Seconds()
	b.ReportMetric(fRate, "flotilla-objects/s")
	b.ReportMetric(kRate, "kubectl-objects/s")
	b.ReportMetric(fRate/kRate, "x-kubectl")
	b.Logf("%d objects per run, %d run(s): flotilla %.0f objects/s (%s per run), kubectl --server-side %.0f objects/s (%s per run), %.1fx",
		totalObjects, iter, fRate, (flotilla / time.Duration(iter)).Round(time.Millisecond),
		kRate, (kubectlTime / time.Duration(iter)).Round(time.Millisecond), fRate/kRate)
}
