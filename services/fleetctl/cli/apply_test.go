package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/services/fleetctl/kubeadmiral"
)

func subjects(evs []stored) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.String()
	}
	return out
}

func wantLines(t *testing.T, r result, lines ...string) {
	t.Helper()
	if r.e != nil {
		t.Fatalf("fleetctl failed: %v\nstderr:\n%s", r.e, r.err)
	}
	if want := strings.Join(lines, "\n") + "\n"; r.out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.out, want)
	}
}

// TestApplySeed000 applies seed 000's story on a fresh NATS server: members,
// the hub objects and web-2-crp (whenToTakeOver Never), then the IfNoDiff
// version, then Never again. Each apply publishes one event per changed
// object; applying the same content again publishes nothing.
func TestApplySeed000(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nats := []string{"--nats", srv.URL()}
	apply := func(files ...string) result {
		args := []string{"apply"}
		for _, f := range files {
			args = append(args, "-f", "testdata/seeds/"+f)
		}
		return fleetctl(t, "", append(args, nats...)...)
	}

	r := apply("members.yaml", "web-2.yaml", "web-2-crp-never.yaml")
	wantLines(t, r,
		"membercluster.cluster.kubernetes-fleet.io/member-1 configured",
		"membercluster.cluster.kubernetes-fleet.io/member-2 configured",
		"membercluster.cluster.kubernetes-fleet.io/member-3 configured",
		"namespace/web-2 configured",
		"configmap/web-config configured",
		"clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp configured",
	)
	evs := storedEvents(t, js)
	want := []string{
		events.TypeMemberJoined + " on flotilla.member.member-1",
		events.TypeMemberJoined + " on flotilla.member.member-2",
		events.TypeMemberJoined + " on flotilla.member.member-3",
		events.TypeHubResourceUpserted + " on flotilla.hub.core.Namespace.-.web-2",
		events.TypeHubResourceUpserted + " on flotilla.hub.core.ConfigMap.web-2.web-config",
		events.TypePlacementUpserted + " on flotilla.placement.web-2-crp",
	}
	if got := subjects(evs); !slices.Equal(got, want) {
		t.Fatalf("stored events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range evs {
		if e.Event.Source() != "fleetctl" {
			t.Errorf("%s: source %q, want fleetctl", e, e.Event.Source())
		}
	}

	// The members as written, defaulted.
	m1 := payload[events.MemberJoined](t, evs[0]).Member
	if m1.Name != "member-1" || m1.Labels["environment"] != "production" || m1.Spec.HeartbeatPeriodSeconds != 30 {
		t.Errorf("member-1 = %+v", m1)
	}
	if got := payload[events.MemberJoined](t, evs[1]).Member.Spec.HeartbeatPeriodSeconds; got != api.DefaultHeartbeatPeriodSeconds {
		t.Errorf("member-2 heartbeat = %d, want the default %d", got, api.DefaultHeartbeatPeriodSeconds)
	}
	// The hub objects as manifests.
	var ns map[string]any
	if err := json.Unmarshal(payload[events.HubResourceUpserted](t, evs[3]).Manifest, &ns); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web-2", "labels": map[string]any{"app": "web-2"}}}; !jsonEqual(ns, want) {
		t.Errorf("namespace manifest = %v, want %v", ns, want)
	}
	// The placement, defaulted, with the seed's apply strategy.
	crp := payload[events.PlacementUpserted](t, evs[5]).Placement
	as := crp.Spec.Strategy.ApplyStrategy
	if as == nil || as.WhenToTakeOver != api.WhenToTakeOverTypeNever || as.ComparisonOption != api.ComparisonOptionTypePartialComparison || as.Type != api.ApplyStrategyTypeClientSideApply {
		t.Errorf("apply strategy = %+v, want Never with the defaults", as)
	}
	if ru := crp.Spec.Strategy.RollingUpdate; ru.MaxUnavailable.String() != "100%" || *ru.UnavailablePeriodSeconds != 1 || ru.MaxSurge.String() != "25%" {
		t.Errorf("rolling update = %+v", ru)
	}
	if crp.Spec.Policy.PlacementType != api.PickAllPlacementType || *crp.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("placement spec = %+v", crp.Spec)
	}

	// The same files again: nothing new.
	r = apply("members.yaml", "web-2.yaml", "web-2-crp-never.yaml")
	wantLines(t, r,
		"membercluster.cluster.kubernetes-fleet.io/member-1 unchanged",
		"membercluster.cluster.kubernetes-fleet.io/member-2 unchanged",
		"membercluster.cluster.kubernetes-fleet.io/member-3 unchanged",
		"namespace/web-2 unchanged",
		"configmap/web-config unchanged",
		"clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp unchanged",
	)
	if n := len(storedEvents(t, js)); n != len(want) {
		t.Errorf("re-applying stored %d new events, want none", n-len(want))
	}

	// IfNoDiff, then Never again: each is published, though Never was
	// published before (the last word counts).
	r = apply("web-2-crp-ifnodiff.yaml")
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp configured")
	r = apply("web-2-crp-never.yaml")
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp configured")
	evs = storedEvents(t, js)
	if len(evs) != len(want)+2 {
		t.Fatalf("stored %d events, want %d", len(evs), len(want)+2)
	}
	if got := payload[events.PlacementUpserted](t, evs[len(evs)-2]).Placement.Spec.Strategy.ApplyStrategy.WhenToTakeOver; got != api.WhenToTakeOverTypeIfNoDiff {
		t.Errorf("second version whenToTakeOver = %s, want IfNoDiff", got)
	}
	last := evs[len(evs)-1]
	if got := payload[events.PlacementUpserted](t, last).Placement.Spec.Strategy.ApplyStrategy.WhenToTakeOver; got != api.WhenToTakeOverTypeNever {
		t.Errorf("third version whenToTakeOver = %s, want Never", got)
	}
	if last.Event.ID() == evs[5].Event.ID() {
		t.Errorf("the re-published Never version reused the first event's id %s: the stream would drop it", last.Event.ID())
	}

	// The topology fleetctl declared on the fresh server.
	for _, s := range []string{bus.StreamEvents, bus.StreamWork, bus.StreamDeadLetter} {
		if _, err := js.Stream(t.Context(), s); err != nil {
			t.Errorf("stream %s: %v", s, err)
		}
	}
	if _, err := js.Consumer(t.Context(), bus.StreamEvents, bus.ConsumerScheduler); err != nil {
		t.Errorf("consumer %s: %v", bus.ConsumerScheduler, err)
	}
}

// TestApplyLeavesTunedTopologyAlone: services declare the topology with their
// own tuning; fleetctl must not reset it to the defaults.
func TestApplyLeavesTunedTopologyAlone(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tuned := bus.TopologyOptions{AckWait: 3 * time.Second, Storage: jetstream.MemoryStorage}
	if err := bus.EnsureTopology(withTimeout(t), js, tuned); err != nil {
		t.Fatal(err)
	}
	r := fleetctl(t, "", "apply", "-f", "testdata/seeds/crp-2.yaml", "--nats", srv.URL())
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/crp-2 configured")
	c, err := js.Consumer(t.Context(), bus.StreamEvents, bus.ConsumerRollout)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.AckWait; got != 3*time.Second {
		t.Errorf("rollout consumer AckWait = %s after apply, want the services' 3s", got)
	}
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Errorf("stream storage = %s after apply, want memory", got)
	}
}

// TestApplySeed004 applies seed 004's KubeAdmiral files: the policy becomes
// two placements, and the resources copied from kubectl get -o yaml reach
// the hub store without server fields, labelled for adoption, so that the
// adopting placement selects them.
func TestApplySeed004(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := fleetctl(t, "", "apply", "-f", "testdata/seeds/propagationPolicy.yaml", "--nats", srv.URL())
	wantLines(t, r, "propagationpolicy.core.kubeadmiral.io/nginx-pp configured (as clusterresourceplacements pp.default.nginx-pp and pp-adopt.default.nginx-pp)")
	r = fleetctl(t, "", "apply", "-f", "testdata/seeds/resources.yaml", "--nats", srv.URL())
	wantLines(t, r,
		"deployment.apps/my-nginx configured (adoptable: labelled flotilla.dev/conflict-resolution=adopt)",
		"service/my-nginx configured (adoptable: labelled flotilla.dev/conflict-resolution=adopt)",
	)
	if !strings.Contains(r.err, "Warning: testdata/seeds/resources.yaml: document 1: deployment.apps/my-nginx: server-populated fields (status, uid, resourceVersion, ...) were removed") {
		t.Errorf("stderr lacks the warning about removed fields:\n%s", r.err)
	}

	evs := storedEvents(t, js)
	want := []string{
		events.TypePlacementUpserted + " on flotilla.placement.pp_default_nginx-pp",
		events.TypePlacementUpserted + " on flotilla.placement.pp-adopt_default_nginx-pp",
		events.TypeHubResourceUpserted + " on flotilla.hub.apps.Deployment.default.my-nginx",
		events.TypeHubResourceUpserted + " on flotilla.hub.core.Service.default.my-nginx",
	}
	if got := subjects(evs); !slices.Equal(got, want) {
		t.Fatalf("stored events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	keep := payload[events.PlacementUpserted](t, evs[0]).Placement
	adopt := payload[events.PlacementUpserted](t, evs[1]).Placement
	if keep.Name != "pp.default.nginx-pp" || adopt.Name != "pp-adopt.default.nginx-pp" {
		t.Fatalf("placements %s and %s", keep.Name, adopt.Name)
	}

	for _, e := range evs[2:] {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(payload[events.HubResourceUpserted](t, e).Manifest); err != nil {
			t.Fatal(err)
		}
		for _, f := range [][]string{{"status"}, {"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "creationTimestamp"},
			{"metadata", "generation"}, {"metadata", "annotations", api.LastAppliedConfigAnnotation}, {"spec", "clusterIP"}, {"spec", "template", "metadata", "creationTimestamp"}} {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, f...); found {
				t.Errorf("%s/%s still has %s", u.GetKind(), u.GetName(), strings.Join(f, "."))
			}
		}
		if u.GetAnnotations()[api.ConflictResolutionAnnotation] != api.ConflictResolutionAdopt {
			t.Errorf("%s lost the adopt annotation", u.GetKind())
		}
		if got, want := selects(t, adopt, u), true; got != want {
			t.Errorf("the adopting placement does not select %s/%s (labels %v)", u.GetKind(), u.GetName(), u.GetLabels())
		}
		if selects(t, keep, u) {
			t.Errorf("the non-adopting placement selects %s/%s too", u.GetKind(), u.GetName())
		}
	}
	// The replicas and pod template stay as the member has them, so that
	// adoption changes nothing that restarts pods.
	u := &unstructured.Unstructured{}
	_ = u.UnmarshalJSON(payload[events.HubResourceUpserted](t, evs[2]).Manifest)
	if replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); replicas != 2 {
		t.Errorf("replicas = %d", replicas)
	}
	if image, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers"); len(image) != 1 {
		t.Errorf("containers = %v", image)
	}

	// Deleting the policy deletes both placements; deleting the resources
	// takes them out of the hub store, in their namespace.
	r = fleetctl(t, "", "delete", "-f", "testdata/seeds/propagationPolicy.yaml", "-f", "testdata/seeds/resources.yaml", "--nats", srv.URL())
	wantLines(t, r,
		`propagationpolicy.core.kubeadmiral.io "nginx-pp" deleted (clusterresourceplacements pp.default.nginx-pp and pp-adopt.default.nginx-pp)`,
		`deployment.apps "my-nginx" deleted`,
		`service "my-nginx" deleted`,
	)
	evs = storedEvents(t, js)[4:]
	want = []string{
		events.TypePlacementDeleted + " on flotilla.placement.pp_default_nginx-pp",
		events.TypePlacementDeleted + " on flotilla.placement.pp-adopt_default_nginx-pp",
		events.TypeHubResourceDeleted + " on flotilla.hub.apps.Deployment.default.my-nginx",
		events.TypeHubResourceDeleted + " on flotilla.hub.core.Service.default.my-nginx",
	}
	if got := subjects(evs); !slices.Equal(got, want) {
		t.Fatalf("stored events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := payload[events.HubResourceDeleted](t, evs[2]).Resource, (api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: "my-nginx"}); got != want {
		t.Errorf("deleted %+v, want %+v", got, want)
	}
}

// selects reports whether one of crp's selectors picks u by kind and labels.
func selects(t *testing.T, crp api.ClusterResourcePlacement, u *unstructured.Unstructured) bool {
	t.Helper()
	gvk := u.GroupVersionKind()
	for _, s := range crp.Spec.ResourceSelectors {
		if s.Group != gvk.Group || s.Version != gvk.Version || s.Kind != gvk.Kind {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		// As the rollout's selection matches: the namespace as a label.
		set := labels.Merge(labels.Set(u.GetLabels()), labels.Set{kubeadmiral.NamespaceLabel: u.GetNamespace()})
		if sel.Matches(set) {
			return true
		}
	}
	return false
}

func TestDelete(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	nats := []string{"--nats", srv.URL()}
	r := fleetctl(t, "", append([]string{"delete", "crp", "web-2-crp", "crp-1"}, nats...)...)
	wantLines(t, r,
		`clusterresourceplacement.placement.kubernetes-fleet.io "web-2-crp" deleted`,
		`clusterresourceplacement.placement.kubernetes-fleet.io "crp-1" deleted`,
	)
	r = fleetctl(t, "", append([]string{"delete", "crp/web-2-crp"}, nats...)...)
	wantLines(t, r, `clusterresourceplacement.placement.kubernetes-fleet.io "web-2-crp" already deleted`)
	r = fleetctl(t, "", append([]string{"delete", "members", "member-3", "--leave-policy", "Delete"}, nats...)...)
	wantLines(t, r, `membercluster.cluster.kubernetes-fleet.io "member-3" deleted`)
	r = fleetctl(t, "", append([]string{"delete", "-f", "testdata/seeds/members.yaml"}, nats...)...)
	wantLines(t, r,
		`membercluster.cluster.kubernetes-fleet.io "member-1" deleted`,
		`membercluster.cluster.kubernetes-fleet.io "member-2" deleted`,
		`membercluster.cluster.kubernetes-fleet.io "member-3" deleted`,
	)

	evs := storedEvents(t, js)
	want := []string{
		events.TypePlacementDeleted + " on flotilla.placement.web-2-crp",
		events.TypePlacementDeleted + " on flotilla.placement.crp-1",
		events.TypeMemberLeft + " on flotilla.member.member-3",
		events.TypeMemberLeft + " on flotilla.member.member-1",
		events.TypeMemberLeft + " on flotilla.member.member-2",
		events.TypeMemberLeft + " on flotilla.member.member-3",
	}
	if got := subjects(evs); !slices.Equal(got, want) {
		t.Fatalf("stored events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := payload[events.MemberLeft](t, evs[2]); got.Name != "member-3" || got.LeavePolicy != events.LeaveDelete {
		t.Errorf("member left = %+v, want member-3 with Delete", got)
	}
	if got := payload[events.MemberLeft](t, evs[5]); got.LeavePolicy != "" {
		t.Errorf("member left = %+v, want no leave policy (Keep by default)", got)
	}
}

// TestApplyPublishesNothingWhenAnyFileIsInvalid uses a real server to show
// that a valid file given with an invalid one is not published either.
func TestApplyPublishesNothingWhenAnyFileIsInvalid(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(withTimeout(t), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	r := fleetctl(t, "", "apply", "-f", "testdata/seeds/web-2-crp-never.yaml", "-f", "testdata/invalid/placement-rules.yaml", "--nats", srv.URL())
	if r.e == nil || r.out != "" {
		t.Fatalf("apply = %v, stdout %q; want the problems and nothing applied", r.e, r.out)
	}
	if evs := storedEvents(t, js); len(evs) != 0 {
		t.Errorf("stored %v, want nothing", subjects(evs))
	}
}

func TestApplyFromStdinAndDryRun(t *testing.T) {
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	crp := "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: from-stdin\nspec:\n  resourceSelectors:\n  - {group: \"\", version: v1, kind: Namespace, name: web}\n"
	r := fleetctl(t, crp, "apply", "-f", "-", "--dry-run", "--nats", srv.URL())
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/from-stdin configured (dry run)")
	if _, err := js.Stream(t.Context(), bus.StreamEvents); err == nil {
		t.Errorf("a dry run declared the topology")
	}
	r = fleetctl(t, crp, "apply", "-f", "-", "--nats", srv.URL())
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/from-stdin configured")
	if evs := storedEvents(t, js); len(evs) != 1 || evs[0].Subject != "flotilla.placement.from-stdin" {
		t.Errorf("stored %v", subjects(evs))
	}
}

// TestApplyWarnsAboutUnselectedKinds: an object labelled for a policy whose
// kinds do not include its own would silently stay on the hub.
func TestApplyWarnsAboutUnselectedKinds(t *testing.T) {
	in := `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: web
  namespace: default
  labels:
    kubeadmiral.io/propagation-policy-name: nginx-pp
`
	r := fleetctl(t, in, "apply", "-f", "-", "--dry-run", "--nats", unreachable)
	if r.e != nil {
		t.Fatal(r.e)
	}
	want := "Warning: <stdin>: document 1: servicemonitor.monitoring.coreos.com/web: PropagationPolicy nginx-pp does not select ServiceMonitor objects, so this one stays on the hub; add monitoring.coreos.com/v1/ServiceMonitor to the policy's " + kubeadmiral.KindsAnnotation + " annotation\n"
	if r.err != want {
		t.Errorf("stderr = %q, want %q", r.err, want)
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
