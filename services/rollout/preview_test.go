package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// A rollout preview selects from the hub store with the file's objects laid over it,
// renders each cluster's overrides and plans the batches from where the placement
// stands, and changes nothing: no row, no event.
func TestPreviewRendersAndPlansWithoutChangingAnything(t *testing.T) {
	f := newFixture(t, rollout.Config{})
	f.start()
	f.member("member-1", map[string]string{"region": "east"}, events.TypeMemberJoined)
	f.member("member-2", map[string]string{"region": "west"}, events.TypeMemberJoined)
	f.member("member-3", map[string]string{"region": "north"}, events.TypeMemberJoined)
	f.hub(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app"}}`)
	ref := &api.PlacementRef{Name: "web"}
	f.override(events.OverrideUpserted{ResourceOverride: &api.ResourceOverride{
		ObjectMeta: metav1.ObjectMeta{Name: "web-image", Namespace: "app"},
		Spec: api.ResourceOverrideSpec{Placement: ref,
			ResourceSelectors: []api.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{ClusterSelector: &api.ClusterSelector{},
				JSONPatchOverrides: []api.JSONPatchOverride{
					jsonPatch("replace", "/spec/template/spec/containers/0/image", `"nginx:${MEMBER-CLUSTER-LABEL-KEY-region}"`)}}}}},
	}})
	p := rolling(crp("web", namespace("app")), intstr.FromInt32(1), intstr.FromInt32(0), 60)
	f.place(p)
	f.schedule("web", 1, []string{"member-1"}, nil)
	f.report(f.waitWork("member-1", "web", 0), applied, available)
	f.waitReady("web", "member-1")
	time.Sleep(200 * time.Millisecond) // the last report's progress settles

	before := f.state()
	// The file adds a Deployment the hub does not have, and the placement now goes to three.
	deployment := json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"app"},
		"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`)
	req, _ := json.Marshal(events.RolloutPreviewRequest{Placement: p, Clusters: []string{"member-3", "member-1", "member-2"},
		Objects: []json.RawMessage{deployment}})
	got, err := reply.Call[events.RolloutPreview](t.Context(), f.NC, events.PreviewRolloutSubject, "", req, patience)
	if err != nil {
		t.Fatal(err)
	}
	if keys := resourceKeys(got.Resources); fmt.Sprint(keys) != "[v1/Namespace//app apps/v1/Deployment/app/web]" {
		t.Errorf("selected %v, want the hub's namespace and the file's Deployment", keys)
	}
	for _, c := range got.Clusters {
		want := map[string]string{"member-1": "nginx:east", "member-2": "nginx:west", "member-3": "nginx:north"}[c.Cluster]
		w := events.WorkDesired{Manifests: c.Manifests}
		if img := manifestField(t, w, "Deployment", "spec", "template", "spec", "containers", "0", "image"); img != want || c.Error != "" {
			t.Errorf("%s: image %v (error %q), want %s", c.Cluster, img, c.Error, want)
		}
		if len(c.Overrides) != 1 || c.Overrides[0] != "app/web-image-0" {
			t.Errorf("%s: overrides %v, want app/web-image-0", c.Cluster, c.Overrides)
		}
	}
	// maxUnavailable 1, maxSurge 0, target 3: member-1 is the one available cluster and
	// 3 - 1 must stay available, so the two additions come first and member-1 is updated
	// once they are available.
	plan, _ := json.Marshal(got.Plan.Batches)
	if want := `[{"name":"1","clusters":[{"cluster":"member-2","action":"add"},{"cluster":"member-3","action":"add"}]},` +
		`{"name":"2","clusters":[{"cluster":"member-1","action":"update"}]}]`; string(plan) != want {
		t.Errorf("batches %s, want %s", plan, want)
	}
	if got.Plan.MaxUnavailable != 1 || got.Plan.Type != "RollingUpdate" {
		t.Errorf("plan %+v", got.Plan)
	}

	// An override in the file is laid over the live one of its name: its next snapshot.
	fileOverride := events.OverrideUpserted{ResourceOverride: &api.ResourceOverride{
		ObjectMeta: metav1.ObjectMeta{Name: "web-image", Namespace: "app"},
		Spec: api.ResourceOverrideSpec{Placement: ref,
			ResourceSelectors: []api.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{ClusterSelector: &api.ClusterSelector{},
				JSONPatchOverrides: []api.JSONPatchOverride{
					jsonPatch("replace", "/spec/template/spec/containers/0/image", `"nginx:file-${MEMBER-CLUSTER-LABEL-KEY-region}"`)}}}}},
	}}
	req, _ = json.Marshal(events.RolloutPreviewRequest{Placement: p, Clusters: []string{"member-1"},
		Objects: []json.RawMessage{deployment}, Overrides: []events.OverrideUpserted{fileOverride}})
	got, err = reply.Call[events.RolloutPreview](t.Context(), f.NC, events.PreviewRolloutSubject, "", req, patience)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Clusters[0]
	w := events.WorkDesired{Manifests: c.Manifests}
	if img := manifestField(t, w, "Deployment", "spec", "template", "spec", "containers", "0", "image"); img != "nginx:file-east" ||
		len(c.Overrides) != 1 || c.Overrides[0] != "app/web-image-1" {
		t.Errorf("with the file's override: image %v, overrides %v; want nginx:file-east from app/web-image-1", img, c.Overrides)
	}

	// A bad placement is answered with its field path, not a preview.
	bad := p
	bad.Spec.ResourceSelectors = nil
	req, _ = json.Marshal(events.RolloutPreviewRequest{Placement: bad})
	if _, err := reply.Call[events.RolloutPreview](t.Context(), f.NC, events.PreviewRolloutSubject, "", req, patience); err == nil {
		t.Error("a placement without resourceSelectors was previewed")
	}
	f.expectState(before)
}

// state is every table's row count and content digest, and the EVENTS and WORK streams'
// message counts.
func (f *fixture) state() map[string]string {
	f.t.Helper()
	ctx := f.t.Context()
	out := map[string]string{}
	rows, err := f.Pool.Query(ctx, `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`)
	if err != nil {
		f.t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		f.t.Fatal(err)
	}
	for _, table := range tables {
		var n int64
		var digest string
		q := fmt.Sprintf(`select count(*), coalesce(md5(string_agg(t::text, '|' order by t::text)), '') from %s t`, pgx.Identifier{table}.Sanitize())
		if err := f.Pool.QueryRow(ctx, q).Scan(&n, &digest); err != nil {
			f.t.Fatal(err)
		}
		out["table "+table] = fmt.Sprint(n, " ", digest)
	}
	for _, name := range []string{bus.StreamEvents, bus.StreamWork} {
		s, err := f.JS.Stream(ctx, name)
		if err != nil {
			f.t.Fatal(err)
		}
		info, err := s.Info(context.WithoutCancel(ctx))
		if err != nil {
			f.t.Fatal(err)
		}
		out["stream "+name] = fmt.Sprint(info.State.Msgs)
	}
	return out
}

func (f *fixture) expectState(before map[string]string) {
	f.t.Helper()
	after := f.state()
	for k, v := range after {
		if before[k] != v {
			f.t.Errorf("%s changed: %s, was %s", k, v, before[k])
		}
	}
}

// The plan of an External placement is the stages of its newest staged update run's
// strategy, each with its clusters.
func TestPreviewPlanOfAStagedPlacement(t *testing.T) {
	f := newFixture(t, rollout.Config{})
	f.start()
	f.joinMember("m1", map[string]string{"env": "staging"})
	f.joinMember("m2", map[string]string{"env": "prod"})
	f.joinMember("m3", map[string]string{"env": "prod"})
	f.hub(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app"}}`)
	p := crp("web", namespace("app"))
	p.Spec.Strategy.Type = api.ExternalRolloutStrategyType
	f.place(p)
	f.staged(strategyOf("two-stages", envStage("staging", "staging", intstr.FromInt32(1)), envStage("prod", "prod", intstr.FromInt32(1))))
	f.staged(runOf("web-run", "web", "0", "two-stages"))
	f.waitRun("web-run", "stored", func(api.ClusterStagedUpdateRun) error { return nil })

	req, _ := json.Marshal(events.RolloutPreviewRequest{Placement: p, Clusters: []string{"m1", "m2", "m3"}})
	got, err := reply.Call[events.RolloutPreview](t.Context(), f.NC, events.PreviewRolloutSubject, "", req, patience)
	if err != nil {
		t.Fatal(err)
	}
	stages, _ := json.Marshal(got.Plan.Stages)
	want := `[{"name":"staging","clusters":[{"cluster":"m1","action":"update"}]},` +
		`{"name":"prod","clusters":[{"cluster":"m2","action":"update"},{"cluster":"m3","action":"update"}]}]`
	if got.Plan.Type != "External" || string(stages) != want {
		t.Errorf("plan %s %s (%s), want External %s", got.Plan.Type, stages, got.Plan.Note, want)
	}
}
