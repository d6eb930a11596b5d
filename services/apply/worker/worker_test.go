package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

const member = "member-1"

func applied(r *events.WorkReported) bool { return r.Applied.Status == "True" }

// TestApplyReportDelete: desired state on the bus is applied and reported,
// availability is reported when the member's controller catches up, and a
// tombstone removes the placement's objects.
func TestApplyReportDelete(t *testing.T) {
	f := newFleet(t)
	f.start(member, nil)
	placement := name(t, "crp")
	ns := name(t, "")
	f.desire(work(t, member, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1"), deploymentYAML(ns, "web", "nginx:1.27")))

	r := f.waitReport(member, placement, "applied", applied)
	if r.ResourceIndex != 1 || r.Generation != 1 || len(r.Manifests) != 3 {
		t.Errorf("report = %s", dump(r))
	}
	f.waitReport(member, placement, "available", func(r *events.WorkReported) bool { return r.Available.Status == "True" })
	if get(t, member, configMaps, ns, "app-config") == nil {
		t.Fatal("ConfigMap not on the member")
	}

	f.tombstone(member, placement, api.DeleteStrategy{})
	f.waitReport(member, placement, "deleted", func(r *events.WorkReported) bool { return r.Deleted })
	poll.Every(t, step, timeout, "the namespace to go", func() error {
		if u := get(t, member, namespaces, "", ns); u != nil && u.GetDeletionTimestamp() == nil {
			return errors.New("the namespace is there and not being deleted")
		}
		return nil
	})
}

func editConfigMap(t *testing.T, ns, n, value string) time.Time {
	t.Helper()
	c := client(t, member).Resource(configMaps).Namespace(ns)
	u, err := c.Get(t.Context(), n, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, value, "data", "key")
	edited := time.Now()
	if _, err := c.Update(t.Context(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	return edited
}

func hasDrift(kind, n string) func(r *events.WorkReported) bool {
	return func(r *events.WorkReported) bool {
		m, ok := result(r, kind, n)
		return ok && len(m.Drifts) > 0
	}
}

// TestDriftWatched: a member-side edit is noticed through the watch and
// reported; with whenToApply Always the hub's value comes back, with
// IfNotDrifted it stays and the object reports FoundDrifts.
func TestDriftWatched(t *testing.T) {
	f := newFleet(t)
	f.start(member, nil)
	for _, when := range []api.WhenToApplyType{api.WhenToApplyTypeAlways, api.WhenToApplyTypeIfNotDrifted} {
		t.Run(string(when), func(t *testing.T) {
			placement := name(t, "crp")
			ns := name(t, "")
			f.desire(work(t, member, placement, api.ApplyStrategy{WhenToApply: when}, nsYAML(ns), configMapYAML(ns, "app-config", "1")))
			f.waitReport(member, placement, "applied", applied)

			before := f.mark()
			edited := editConfigMap(t, ns, "app-config", "edited")
			r := f.waitReportAfter(before, member, placement, "a drift", hasDrift("ConfigMap", "app-config"))
			t.Logf("drift reported %s after the member-side edit", time.Since(edited).Round(time.Millisecond))
			m, _ := result(r, "ConfigMap", "app-config")
			want := api.PatchDetail{Path: "/data/key", ValueInHub: "1", ValueInMember: "edited"}
			if !slices.Contains(m.Drifts, want) || m.FirstDriftedAt == nil {
				t.Errorf("drift = %s", dump(m))
			}

			switch when {
			case api.WhenToApplyTypeAlways:
				f.waitReportAfter(before, member, placement, "the corrected state", func(r *events.WorkReported) bool {
					m, ok := result(r, "ConfigMap", "app-config")
					return ok && len(m.Drifts) == 0 && m.Applied.Status == "True"
				})
				if v := get(t, member, configMaps, ns, "app-config").Object["data"].(map[string]any)["key"]; v != "1" {
					t.Errorf("hub value not restored: %v", v)
				}
			case api.WhenToApplyTypeIfNotDrifted:
				if m.Applied.Reason != api.ManifestFoundDriftsReason || m.Applied.Status != "False" {
					t.Errorf("applied = %+v", m.Applied)
				}
				if v := get(t, member, configMaps, ns, "app-config").Object["data"].(map[string]any)["key"]; v != "edited" {
					t.Errorf("IfNotDrifted overwrote the edit: %v", v)
				}
			}
		})
	}
}

// TestRestartConverges stops a worker mid-rollout, changes one placement
// while it is down, and starts a new worker: the change is applied once and
// the untouched placement is not applied again in a way that shows (its
// Deployment keeps generation 1).
func TestRestartConverges(t *testing.T) {
	f := newFleet(t)
	stop := f.start(member, nil)
	steady, moving := name(t, "steady"), name(t, "moving")
	nsSteady, nsMoving := name(t, "s"), name(t, "m")
	f.desire(work(t, member, steady, api.ApplyStrategy{}, nsYAML(nsSteady), deploymentYAML(nsSteady, "web", "nginx:1.27")))
	f.desire(work(t, member, moving, api.ApplyStrategy{}, nsYAML(nsMoving), deploymentYAML(nsMoving, "web", "nginx:1.27")))
	f.waitReport(member, steady, "applied", applied)
	f.waitReport(member, moving, "applied", applied)
	stop()

	next := work(t, member, moving, api.ApplyStrategy{}, nsYAML(nsMoving), deploymentYAML(nsMoving, "web", "nginx:1.28"))
	next.ResourceIndex, next.Generation = 2, 2
	f.desire(next)

	restarted := f.mark()
	f.start(member, nil)
	f.waitReportAfter(restarted, member, moving, "the new snapshot applied", func(r *events.WorkReported) bool { return applied(r) && r.ResourceIndex == 2 })
	f.waitReportAfter(restarted, member, steady, "re-applied after the restart", applied)

	if g := get(t, member, deployments, nsSteady, "web").GetGeneration(); g != 1 {
		t.Errorf("the untouched Deployment is at generation %d, want 1", g)
	}
	d := get(t, member, deployments, nsMoving, "web")
	if g := d.GetGeneration(); g != 2 {
		t.Errorf("the changed Deployment is at generation %d, want 2", g)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if img := containers[0].(map[string]any)["image"]; img != "nginx:1.28" {
		t.Errorf("image = %v", img)
	}
}

// TestHeartbeat reports the member's nodes and their cpu and memory.
func TestHeartbeat(t *testing.T) {
	f := newFleet(t)
	c := client(t, "member-2").Resource(nodes)
	for _, n := range []string{"node-a", "node-b"} {
		node := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n},
		}}
		created, err := c.Create(t.Context(), node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["status"] = map[string]any{
			"capacity":    map[string]any{"cpu": "4", "memory": "16Gi"},
			"allocatable": map[string]any{"cpu": "3500m", "memory": "15Gi"},
		}
		if _, err := c.UpdateStatus(t.Context(), created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	f.start("member-2", nil)
	hb := f.waitHeartbeat("member-2", "two nodes", func(hb *events.MemberHeartbeat) bool {
		return hb.Healthy && hb.Properties[api.NodeCountProperty].Value == "2"
	})
	want := map[api.PropertyName]string{
		api.TotalCPUProperty: "8", api.AllocatableCPUProperty: "7", api.AvailableCPUProperty: "7",
		api.TotalMemoryProperty: "32Gi", api.AllocatableMemoryProperty: "30Gi",
	}
	for k, v := range want {
		if got := hb.Properties[k].Value; got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if q := hb.ResourceUsage.Allocatable["cpu"]; q.String() != "7" {
		t.Errorf("allocatable cpu = %s", q.String())
	}
	// The member's namespaces, for ResourcePlacements (none of them Flotilla's).
	for _, ns := range []string{"default", "kube-system"} {
		if owner, ok := hb.Namespaces[ns]; !ok || owner != "" {
			t.Errorf("namespace %s in the heartbeat: %q, %v (namespaces %v)", ns, owner, ok, hb.Namespaces)
		}
	}
}

// TestNamespaceHeartbeat: a namespace created on the member is in a
// heartbeat soon, long before the period is up, with the owner Flotilla
// marked it with, and that heartbeat still carries the member's properties.
func TestNamespaceHeartbeat(t *testing.T) {
	f := newFleet(t)
	f.start("member-1", func(c *worker.Config) { c.HeartbeatPeriod = time.Hour })
	f.waitHeartbeat("member-1", "the first", func(hb *events.MemberHeartbeat) bool { return hb.Healthy })
	ns := name(t, "")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{manifest.ManagedByLabel: manifest.ManagedByValue, manifest.OwnerLabel("web"): manifest.OwnerValue}},
	}}
	if _, err := client(t, "member-1").Resource(namespaces).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client(t, "member-1").Resource(namespaces).Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	hb := f.waitHeartbeat("member-1", "the new namespace", func(hb *events.MemberHeartbeat) bool {
		_, ok := hb.Namespaces[ns]
		return ok
	})
	if owner := hb.Namespaces[ns]; owner != manifest.OwnerTokens(u.GetLabels())[0] {
		t.Errorf("namespace %s reported as created by %q", ns, owner)
	}
	if !hb.Healthy || hb.Properties[api.NodeCountProperty].Value == "" {
		t.Errorf("the heartbeat for a namespace lost the member's properties: %+v", hb)
	}
}

// TestUnreachableMember: a member whose API server is gone gets a clear
// failure per placement and an unhealthy heartbeat, and the worker keeps
// retrying without piling up work.
func TestUnreachableMember(t *testing.T) {
	f := newFleet(t)
	gone := "gone"
	if err := members.AddMembers(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	cfg := members.RESTConfig(gone)
	if err := members.StopMember(gone); err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{Cluster: gone, REST: cfg, JetStream: f.js, HeartbeatPeriod: time.Second,
		RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	placement := name(t, "crp")
	f.desire(work(t, gone, placement, api.ApplyStrategy{}, nsYAML("x"), configMapYAML("x", "y", "1")))
	r := f.waitReport(gone, placement, "a failure", func(r *events.WorkReported) bool { return r.Applied.Status == "False" })
	for _, m := range r.Manifests {
		if !strings.Contains(m.Applied.Message, "unreachable") {
			t.Errorf("manifest failure does not say the member is unreachable: %+v", m.Applied)
		}
	}
	hb := f.waitHeartbeat(gone, "unhealthy", func(hb *events.MemberHeartbeat) bool { return !hb.Healthy })
	if hb.Message == "" {
		t.Error("unhealthy heartbeat without a reason")
	}
}

// TestKubeconfigDir runs a worker per kubeconfig file of a directory in one
// process.
func TestKubeconfigDir(t *testing.T) {
	f := newFleet(t)
	dir := t.TempDir()
	for _, m := range []string{"member-1", "member-2"} {
		b, err := os.ReadFile(members.Kubeconfig(m))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, m+".kubeconfig"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := worker.Options{KubeconfigDir: dir}.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "member-1" || ms[1].Name != "member-2" {
		t.Fatalf("members = %+v", ms)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- worker.RunMembers(ctx, f.js, ms, worker.Config{HeartbeatPeriod: time.Second}) }()
	t.Cleanup(func() { cancel(); <-done })

	placement := name(t, "crp")
	ns := name(t, "")
	for _, m := range ms {
		f.desire(work(t, m.Name, placement, api.ApplyStrategy{}, nsYAML(ns)))
	}
	for _, m := range ms {
		f.waitReport(m.Name, placement, "applied", applied)
		if get(t, m.Name, namespaces, "", ns) == nil {
			t.Errorf("namespace missing on %s", m.Name)
		}
	}
}

// TestRetriesUntilApplied: a manifest that fails for a reason that can pass
// (its namespace is missing, as in seed 003) is retried with backoff and
// applied once the namespace exists.
func TestRetriesUntilApplied(t *testing.T) {
	f := newFleet(t)
	f.start(member, func(c *worker.Config) { c.RetryBase, c.RetryMax = 50*time.Millisecond, 500*time.Millisecond })
	placement := name(t, "crp")
	missing := name(t, "later")
	f.desire(work(t, member, placement, api.ApplyStrategy{}, configMapYAML(missing, "app-config", "1")))
	r := f.waitReport(member, placement, "a failure", func(r *events.WorkReported) bool { return r.Applied.Status == "False" })
	if m, _ := result(r, "ConfigMap", "app-config"); !strings.Contains(m.Applied.Message, "not found") {
		t.Errorf("failure = %+v", m.Applied)
	}

	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": missing}}}
	if _, err := client(t, member).Resource(namespaces).Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitReport(member, placement, "applied after the namespace appeared", applied)
}

// TestMemberChangesAreReportedTogether: ten load balancers of one placement get their
// addresses at once on the member; the worker reports their availability in fewer reports
// than changes, and its last report has them all available.
func TestMemberChangesAreReportedTogether(t *testing.T) {
	f := newFleet(t)
	f.start(member, nil)
	placement, ns := name(t, "crp"), name(t, "")
	const services = 10
	manifests := []string{nsYAML(ns)}
	for i := range services {
		manifests = append(manifests, fmt.Sprintf(
			"apiVersion: v1\nkind: Service\nmetadata: {name: lb-%d, namespace: %s}\nspec:\n  type: LoadBalancer\n  ports: [{port: 80}]\n", i, ns))
	}
	f.desire(work(t, member, placement, api.ApplyStrategy{}, manifests...))
	f.waitReport(member, placement, "applied, load balancers waiting", applied)

	before := f.mark()
	c := client(t, member).Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).Namespace(ns)
	for i := range services {
		svc, err := c.Get(t.Context(), fmt.Sprintf("lb-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedSlice(svc.Object, []any{map[string]any{"ip": fmt.Sprintf("192.0.2.%d", i+1)}}, "status", "loadBalancer", "ingress")
		if _, err := c.UpdateStatus(t.Context(), svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	allAvailable := func(r *events.WorkReported) bool {
		for i := range services {
			if m, ok := result(r, "Service", fmt.Sprintf("lb-%d", i)); !ok || m.Available.Status != "True" {
				return false
			}
		}
		return true
	}
	f.waitReportAfter(before, member, placement, "every load balancer available", allAvailable)
	time.Sleep(3 * reportWindowForTests) // let a report that should not exist arrive
	f.mu.Lock()
	var after []*events.WorkReported
	for _, r := range f.reports[before:] {
		if r.Placement == placement {
			after = append(after, r)
		}
	}
	f.mu.Unlock()
	if len(after) >= services {
		t.Errorf("%d reports for %d member changes made together, want them gathered", len(after), services)
	}
	if !allAvailable(after[len(after)-1]) {
		t.Errorf("the last report does not have every load balancer available: %s", dump(after[len(after)-1]))
	}
	t.Logf("%d member changes made together went out in %d reports", services, len(after))
}

// reportWindowForTests is the worker's report window (reportWindow), for waits.
const reportWindowForTests = 50 * time.Millisecond

// TestWorkOnAnotherPlacementsSubjectIsRefused: desired state must name the placement and
// cluster its subject names. One that does not, read at start (replay) or later (the
// consumer), is never applied: the worker dead-letters it and goes on with the rest.
func TestWorkOnAnotherPlacementsSubjectIsRefused(t *testing.T) {
	f := newFleet(t)
	good, other, third := name(t, "good"), name(t, "other"), name(t, "third")
	nsForged, nsGood := name(t, "f"), name(t, "g")
	forged := work(t, member, other, api.ApplyStrategy{}, nsYAML(nsForged))
	subject, err := events.WorkSubject(member, third)
	if err != nil {
		t.Fatal(err)
	}
	f.publish(subject, events.TypeWorkDesired, forged) // before the start: the replay reads it
	f.start(member, nil)
	f.desire(work(t, member, good, api.ApplyStrategy{}, nsYAML(nsGood)))
	f.waitReport(member, good, "applied", applied)

	if get(t, member, namespaces, "", nsForged) != nil {
		t.Errorf("the namespace of work published on %s's subject is on the member", third)
	}
	dl, err := f.js.Stream(t.Context(), bus.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := dl.GetLastMsgForSubject(t.Context(), bus.DeadLetterSubject("apply-"+member))
	if err != nil {
		t.Fatalf("nothing dead-lettered: %v", err)
	}
	if reason := msg.Header.Get(bus.HeaderDeadLetterReason); !strings.Contains(reason, subject) || !strings.Contains(reason, other) {
		t.Errorf("dead-letter reason %q does not name the subject and the placement", reason)
	}
}

// TestMemberBackIsAppliedAtOnce: a placement that failed while the member's API server was
// down is applied as soon as the server is back, not at the end of its backoff (an hour
// here, so only the worker noticing the member's return can apply it within the test).
func TestMemberBackIsAppliedAtOnce(t *testing.T) {
	f := newFleet(t)
	flaky := "flaky"
	if err := members.AddMembers(t.Context(), flaky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = members.StopMember(flaky) })
	if err := members.StopAPIServer(flaky); err != nil {
		t.Fatal(err)
	}
	f.start(flaky, func(c *worker.Config) {
		c.RetryBase, c.RetryMax, c.ProbePeriod = time.Hour, time.Hour, 100*time.Millisecond
	})
	placement, ns := name(t, "crp"), name(t, "")
	f.desire(work(t, flaky, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1")))
	f.waitReport(flaky, placement, "a failure while the member is down", func(r *events.WorkReported) bool { return r.Applied.Status == "False" })

	if err := members.StartAPIServer(t.Context(), flaky); err != nil {
		t.Fatal(err)
	}
	f.waitReport(flaky, placement, "applied once the member is back", applied)
	if get(t, flaky, configMaps, ns, "app-config") == nil {
		t.Error("the ConfigMap is not on the member")
	}
}

// TestMemberBackIsWatchedAgain takes a member's API server away while the worker is idle
// (only its heartbeat notices) and brings it back: the worker watches the member's objects
// afresh, so a ConfigMap edited by hand after the outage is put back, and the placement's
// report says so.
func TestMemberBackIsWatchedAgain(t *testing.T) {
	f := newFleet(t)
	flaky := "flaky-watch"
	if err := members.AddMembers(t.Context(), flaky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = members.StopMember(flaky) })
	f.start(flaky, func(c *worker.Config) {
		c.RetryBase, c.RetryMax, c.ProbePeriod = time.Hour, time.Hour, 100*time.Millisecond
		c.HeartbeatPeriod, c.ResyncPeriod = 200*time.Millisecond, time.Hour
	})
	placement, ns := name(t, "crp"), name(t, "")
	f.desire(work(t, flaky, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "app-config", "1")))
	f.waitReport(flaky, placement, "applied", applied)

	if err := members.StopAPIServer(flaky); err != nil {
		t.Fatal(err)
	}
	f.waitHeartbeat(flaky, "the member unhealthy while its API server is down", func(hb *events.MemberHeartbeat) bool { return !hb.Healthy })
	if err := members.StartAPIServer(t.Context(), flaky); err != nil {
		t.Fatal(err)
	}
	f.waitHeartbeat(flaky, "the member healthy again", func(hb *events.MemberHeartbeat) bool { return hb.Healthy })

	before := f.mark()
	c := client(t, flaky).Resource(configMaps).Namespace(ns)
	u, err := c.Get(t.Context(), "app-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "edited", "data", "key")
	if _, err := c.Update(t.Context(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	f.waitReportAfter(before, flaky, placement, "the edit after the outage seen as a drift", hasDrift("ConfigMap", "app-config"))
	poll.Every(t, 100*time.Millisecond, time.Minute, "the hub value back on the member", func() error {
		if v := get(t, flaky, configMaps, ns, "app-config").Object["data"].(map[string]any)["key"]; v != "1" {
			return fmt.Errorf("data.key is %v", v)
		}
		return nil
	})
}
