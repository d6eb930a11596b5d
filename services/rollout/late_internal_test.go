package rollout

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Events the rollout holds state from, delivered out of order (as the bus does after a
// failed attempt): each older one changes nothing. The test hands the events over as the
// consumer would, with the stream sequences it chooses.
func TestLateEventsLose(t *testing.T) {
	env := servicetest.New(t)
	senv := &service.Env{Name: "rollout", Source: "/flotilla/rollout", NC: env.NC, JS: env.JS,
		Publisher: env.Publisher, Pool: env.Pool, Log: env.Logger()}
	r := newRollout(senv, Config{Now: time.Now})
	n := 0
	deliver := func(seq uint64, typ string, payload any) {
		t.Helper()
		n++
		ev, err := events.New(typ, "/flotilla/test", "", fmt.Sprintf("late-%d", n), payload)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.handle(t.Context(), []bus.Delivery{{Event: ev, Meta: bus.Meta{Sequence: seq, Time: time.Now()}}}); err != nil {
			t.Fatalf("event %d (%s): %v", seq, typ, err)
		}
	}
	query := func(q string, args ...any) string {
		t.Helper()
		var s string
		if err := env.Pool.QueryRow(t.Context(), q, args...).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	placement := func(n int32) *events.PlacementUpserted {
		return &events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web"}},
				Policy: &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &n}}}}
	}
	configMap := func(value string) *events.HubResourceUpserted {
		return &events.HubResourceUpserted{Manifest: json.RawMessage(
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"web"},"data":{"v":"` + value + `"}}`)}
	}
	cm := api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: "c"}
	joined := &events.MemberJoined{Member: api.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-1"}}}

	t.Run("placement.upserted", func(t *testing.T) {
		deliver(10, events.TypePlacementUpserted, placement(3))
		deliver(9, events.TypePlacementUpserted, placement(1))
		if got := query(`select spec->'policy'->>'numberOfClusters' from rollout_placements where name = 'web'`); got != "3" {
			t.Errorf("numberOfClusters %s after a late upsert, want 3", got)
		}
	})
	t.Run("placement.deleted", func(t *testing.T) {
		deliver(8, events.TypePlacementDeleted, &events.PlacementDeleted{Name: "web"})
		if got := query(`select deleted::text from rollout_placements where name = 'web'`); got != "false" {
			t.Error("a late deletion deleted the placement")
		}
	})
	t.Run("member.joined", func(t *testing.T) {
		deliver(21, events.TypeMemberLeft, &events.MemberLeft{Name: "member-1", LeavePolicy: events.LeaveDelete})
		deliver(20, events.TypeMemberJoined, joined)
		if got := query(`select left_fleet::text from rollout_members where name = 'member-1'`); got != "true" {
			t.Error("a late join brought member-1 back")
		}
	})
	t.Run("member.left", func(t *testing.T) {
		deliver(23, events.TypeMemberJoined, joined)
		deliver(22, events.TypeMemberLeft, &events.MemberLeft{Name: "member-1"})
		if got := query(`select left_fleet::text from rollout_members where name = 'member-1'`); got != "false" {
			t.Error("a late leave removed member-1")
		}
	})
	t.Run("hub.resource.upserted", func(t *testing.T) {
		deliver(31, events.TypeHubResourceUpserted, configMap("new"))
		deliver(30, events.TypeHubResourceUpserted, configMap("old"))
		if got := query(`select manifest->'data'->>'v' from hub_resources where name = 'c'`); got != "new" {
			t.Errorf("the hub object is %q after a late upsert, want new", got)
		}
	})
	t.Run("hub.resource.deleted", func(t *testing.T) {
		deliver(29, events.TypeHubResourceDeleted, &events.HubResourceDeleted{Resource: cm})
		if got := query(`select deleted::text from hub_resources where name = 'c'`); got != "false" {
			t.Error("a late deletion removed the hub object")
		}
	})
}
