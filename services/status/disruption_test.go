package status_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// The status service answers fleetctl's eviction and disruption budget
// queries from the rows the scheduler keeps in disruptions.
func TestDisruptionQueries(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	for _, row := range []struct{ kind, name, placement, object string }{
		{api.ClusterResourcePlacementEvictionKind, "drain-web", "web", `{"apiVersion":"placement.kubernetes-fleet.io/v1","kind":"ClusterResourcePlacementEviction",
			"metadata":{"name":"drain-web"},"spec":{"placementName":"web","clusterName":"member-1"},
			"status":{"conditions":[{"type":"Valid","status":"True","reason":"ClusterResourcePlacementEvictionValid","message":"Eviction is valid","lastTransitionTime":"2026-11-21T12:00:00Z"}]}}`},
		{api.ClusterResourcePlacementDisruptionBudgetKind, "web", "web", `{"metadata":{"name":"web"},"spec":{"minAvailable":1}}`},
	} {
		if _, err := f.Pool.Exec(t.Context(), `insert into disruptions (kind, name, placement, object) values ($1, $2, $3, $4)`,
			row.kind, row.name, row.placement, row.object); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := query[api.ClusterResourcePlacementEviction](f, events.QueryGetDisruption, events.DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: "drain-web"})
	if e.Error != "" || e.Result.Spec.ClusterName != "member-1" || len(e.Result.Status.Conditions) != 1 {
		t.Errorf("get drain-web = %+v", e)
	}
	if e.Result.APIVersion != "placement.kubernetes-fleet.io/v1" {
		t.Errorf("get drain-web has apiVersion %q, want the one applied", e.Result.APIVersion)
	}
	bs, _ := query[[]api.ClusterResourcePlacementDisruptionBudget](f, events.QueryListDisruptions, events.DisruptionListQuery{Kind: api.ClusterResourcePlacementDisruptionBudgetKind})
	if len(bs.Result) != 1 || bs.Result[0].Spec.MinAvailable.IntValue() != 1 || bs.Result[0].Kind != api.ClusterResourcePlacementDisruptionBudgetKind {
		t.Errorf("list budgets = %+v", bs)
	}
	missing, hdr := query[api.ClusterResourcePlacementEviction](f, events.QueryGetDisruption, events.DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: "none"})
	if !missing.NotFound || hdr.Get("Nats-Service-Error-Code") != "404" {
		t.Errorf("get of a missing eviction = %+v", missing)
	}
	bad, hdr := query[any](f, events.QueryGetDisruption, events.DisruptionKey{Kind: "Pod", Name: "x"})
	if bad.Error == "" || hdr.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("get of kind Pod = %+v, %v", bad, hdr)
	}
}
