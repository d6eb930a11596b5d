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

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

	// The member's etcd and API server, to measure the CPU each run costs
	// them (Linux only; zero elsewhere).
	server := processesUnder(env.Dir())
	var flotilla, kubectlTime, bareTime, flotillaCPU, kubectlCPU time.Duration
	iter := 0
	for b.Loop() {
		iter++
		// kubectl, on its own fresh objects.
		b.StopTimer()
		file := filepath.Join(b.TempDir(), "objects.yaml")
		if err := os.WriteFile(file, []byte(strings.Join(manifests(fmt.Sprintf("k%d", iter)), "---\n")), 0o600); err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime(server)
		start := time.Now()
		if err := run("apply", "--server-side", "--field-manager", "bench-kubectl", "-f", file); err != nil {
			b.Fatal(err)
		}
		kubectlTime += time.Since(start)
		kubectlCPU += cpuTime(server) - cpu
		freeServiceIPs(b, env.RESTConfig(member), fmt.Sprintf("k%d", iter))
		w := desired(b, member, fmt.Sprintf("bench-%d", iter), manifests(fmt.Sprintf("f%d", iter)))
		b.StartTimer()

		// The apply worker's applier, cold: a new one per run, so its
		// discovery is measured too.
		cpu = cpuTime(server)
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
		flotillaCPU += cpuTime(server) - cpu
		b.StopTimer()
		// The harness's service range is a /24: free this run's cluster
		// IPs for the next iteration.
		freeServiceIPs(b, env.RESTConfig(member), fmt.Sprintf("f%d", iter))
		b.StartTimer()
		// The physical limit: a bare client-go loop of parallel server-side
		// applies of the same objects (namespaces first), nothing else.
		b.StopTimer()
		docs := manifests(fmt.Sprintf("c%d", iter))
		start = time.Now()
		if err := bareApply(env.RESTConfig(member), docs); err != nil {
			b.Fatal(err)
		}
		bareTime += time.Since(start)
		freeServiceIPs(b, env.RESTConfig(member), fmt.Sprintf("c%d", iter))
		b.StartTimer()
		// A report lists at most events.MaxReportManifests results and
		// counts them all.
		if report.Applied.Status != "True" || report.Counts == nil ||
			report.Counts.Total != totalObjects || report.Counts.Applied != totalObjects {
			for _, m := range report.Manifests {
				if m.Applied.Status != "True" {
					b.Logf("%s %s/%s: %s", m.Resource.Kind, m.Resource.Namespace, m.Resource.Name, m.Applied.Message)
					break
				}
			}
			b.Fatalf("apply failed: %s %s (counts %+v)", report.Applied.Reason, report.Applied.Message, report.Counts)
		}
	}
	fRate := float64(totalObjects*iter) / flotilla.Seconds()
	kRate := float64(totalObjects*iter) / kubectlTime.Seconds()
	b.ReportMetric(fRate, "flotilla-objects/s")
	b.ReportMetric(kRate, "kubectl-objects/s")
	bRate := float64(totalObjects*iter) / bareTime.Seconds()
	b.ReportMetric(fRate/kRate, "x-kubectl")
	b.ReportMetric(bRate, "client-go-parallel-objects/s")
	b.ReportMetric(fRate/bRate, "x-physical-limit")
	perObject := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(totalObjects*iter) }
	b.ReportMetric(perObject(flotillaCPU), "flotilla-server-cpu-ms/object")
	b.ReportMetric(perObject(kubectlCPU), "kubectl-server-cpu-ms/object")
	b.Logf("%d objects per run, %d run(s): flotilla %.0f objects/s (%s per run), kubectl --server-side %.0f objects/s (%s per run), %.1fx; "+
		"member etcd+API server CPU per object: flotilla %.2f ms, kubectl %.2f ms",
		totalObjects, iter, fRate, (flotilla / time.Duration(iter)).Round(time.Millisecond),
		kRate, (kubectlTime / time.Duration(iter)).Round(time.Millisecond), fRate/kRate,
		perObject(flotillaCPU), perObject(kubectlCPU))
	b.Logf("physical limit (bare client-go, %d parallel server-side applies): %.0f objects/s; flotilla is at %.0f%% of it",
		bareWorkers, bRate, 100*fRate/bRate)
}

// bareWorkers is the parallelism of the bare client-go loop.
const bareWorkers = 16 // the applier's default concurrency

// bareApply server-side applies docs with the dynamic client: namespaces
// first, then everything else from bareWorkers goroutines. No ordering
// beyond that, no reads, no results: the most a client can ask of the server.
func bareApply(cfg *rest.Config, docs []string) error {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	resources := map[string]schema.GroupVersionResource{
		"Namespace":  {Version: "v1", Resource: "namespaces"},
		"ConfigMap":  {Version: "v1", Resource: "configmaps"},
		"Service":    {Version: "v1", Resource: "services"},
		"Deployment": {Group: "apps", Version: "v1", Resource: "deployments"},
	}
	apply := func(doc string) error {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		gvr := resources[u.GetKind()]
		_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Apply(context.Background(), u.GetName(), &u,
			metav1.ApplyOptions{FieldManager: "bench-client-go", Force: true})
		return err
	}
	var rest []string
	for _, d := range docs {
		if strings.Contains(d, "kind: Namespace") {
			if err := apply(d); err != nil {
				return err
			}
			continue
		}
		rest = append(rest, d)
	}
	var g errgroup.Group
	g.SetLimit(bareWorkers)
	for _, d := range rest {
		g.Go(func() error { return apply(d) })
	}
	return g.Wait()
}

// processesUnder lists the processes whose command line mentions dir: the
// member's etcd and API server.
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name())
		}
	}
	return out
}

// cpuTime sums the user and system CPU time of the processes.
func cpuTime(pids []string) time.Duration {
	var ticks int64
	for _, p := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", p, "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		var user, sys int64
		fmt.Sscan(f[11], &user)
		fmt.Sscan(f[12], &sys)
		ticks += user + sys
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}
