package status_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// The status service answers fleetctl's staged update queries from the rows
// the rollout keeps in staged_updates.
func TestStagedUpdateQueries(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	for _, row := range []struct{ kind, name, object string }{
		{api.ClusterStagedUpdateRunKind, "web-run", `{"metadata":{"name":"web-run","labels":{"team":"web"}},"spec":{"placementName":"web","resourceSnapshotIndex":"1","stagedRolloutStrategyName":"s","state":"Run"},
			"status":{"conditions":[{"type":"Progressing","status":"False","reason":"UpdateRunWaiting","message":"stage production waits for approval","lastTransitionTime":"2026-11-21T12:00:00Z"}]}}`},
		{api.ClusterStagedUpdateRunKind, "db-run", `{"metadata":{"name":"db-run"},"spec":{"placementName":"db","resourceSnapshotIndex":"0","stagedRolloutStrategyName":"s"}}`},
		{api.ClusterApprovalRequestKind, "web-run-before-production", `{"metadata":{"name":"web-run-before-production"},"spec":{"parentStageRollout":"web-run","targetStage":"production"}}`},
	} {
		if _, err := f.Pool.Exec(t.Context(), `insert into staged_updates (kind, name, object) values ($1, $2, $3)`, row.kind, row.name, row.object); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Pool.Exec(t.Context(), `insert into staged_updates (kind, name, object, deleted) values ($1, 'gone', '{"metadata":{"name":"gone"}}', true)`,
		api.ClusterStagedUpdateRunKind); err != nil {
		t.Fatal(err)
	}

	run, _ := query[api.ClusterStagedUpdateRun](f, events.QueryGetStagedUpdate, events.StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: "web-run"})
	if run.Error != "" || run.Result.Spec.PlacementName != "web" || len(run.Result.Status.Conditions) != 1 {
		t.Errorf("get web-run = %+v", run)
	}
	if run.Result.Kind != api.ClusterStagedUpdateRunKind || run.Result.APIVersion != "placement.kubernetes-fleet.io/v1beta1" {
		t.Errorf("get web-run has apiVersion %q kind %q, want them filled in", run.Result.APIVersion, run.Result.Kind)
	}
	runs, _ := query[[]api.ClusterStagedUpdateRun](f, events.QueryListStagedUpdates, events.StagedUpdateListQuery{Kind: api.ClusterStagedUpdateRunKind})
	if len(runs.Result) != 2 || runs.Result[0].Name != "db-run" || runs.Result[1].Name != "web-run" {
		t.Errorf("list runs = %+v, want db-run and web-run (not the deleted one)", runs)
	}
	labelled, _ := query[[]api.ClusterStagedUpdateRun](f, events.QueryListStagedUpdates, events.StagedUpdateListQuery{Kind: api.ClusterStagedUpdateRunKind, LabelSelector: "team=web"})
	if len(labelled.Result) != 1 || labelled.Result[0].Name != "web-run" {
		t.Errorf("list runs -l team=web = %+v", labelled)
	}
	reqs, _ := query[[]api.ClusterApprovalRequest](f, events.QueryListStagedUpdates, events.StagedUpdateListQuery{Kind: api.ClusterApprovalRequestKind})
	if len(reqs.Result) != 1 || reqs.Result[0].Spec.TargetStage != "production" {
		t.Errorf("list approval requests = %+v", reqs)
	}
	gone, hdr := query[api.ClusterStagedUpdateRun](f, events.QueryGetStagedUpdate, events.StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: "gone"})
	if !gone.NotFound || hdr.Get("Nats-Service-Error-Code") != "404" {
		t.Errorf("get of a deleted run = %+v", gone)
	}
	bad, hdr := query[any](f, events.QueryGetStagedUpdate, events.StagedUpdateKey{Kind: "Pod", Name: "x"})
	if bad.Error == "" || hdr.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("get of kind Pod = %+v, %v", bad, hdr)
	}
}
