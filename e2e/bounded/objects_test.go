package bounded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

// objects is the size of the large placement: a namespace and this many
// ConfigMaps in it.
const objects = 5000

// TestPlacementOf5000ObjectsStaysBounded places a namespace of 5,000
// ConfigMaps on 3 simulated members (the real worker's protocol and
// reports): the status lists all 5,001 selected resources and shows every
// member Available, and no message on EVENTS is over the bound of a piece,
// the snapshot's list of resources and the members' reports among them.
func TestPlacementOf5000ObjectsStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("places 5,000 objects")
	}
	env := servicetest.New(t)
	opts := env.Options()
	start := time.Now()

	publishAsync := func(subject, typ string, payload any) {
		t.Helper()
		ev, err := events.New(typ, "/flotilla/test", subject, "", payload)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := bus.Encode(ev, subject)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.JS.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID())); err != nil {
			t.Fatal(err)
		}
	}
	publishAsync(subject(events.HubResourceSubject("", "Namespace", "", "big")), events.TypeHubResourceUpserted,
		events.HubResourceUpserted{Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"big"}}`)})
	for i := range objects {
		name := fmt.Sprintf("settings-%04d", i)
		cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"big"},"data":{"index":"%d"}}`, name, i)
		publishAsync(subject(events.HubResourceSubject("", "ConfigMap", "big", name)), events.TypeHubResourceUpserted,
			events.HubResourceUpserted{Manifest: json.RawMessage(cm)})
	}
	select {
	case <-env.JS.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishing the hub objects did not complete")
	}

	fleet, err := sim.New(sim.Options{JetStream: env.JS, Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	env.Run("simulated members", fleet.Run)
	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	env.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: opts}) })
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	env.Publish(events.TypePlacementUpserted, subject(events.PlacementSubject("big")), events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "big"},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "big"}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}})

	poll.Every(t, 200*time.Millisecond, 3*time.Minute, "the placement Available on every member with every object selected", func() error {
		var selected, available int
		err := env.Pool.QueryRow(t.Context(), `
			select coalesce(jsonb_array_length(status->'selectedResources'), 0),
				(select count(*) from jsonb_array_elements(status->'placementStatuses') ps, jsonb_array_elements(ps->'conditions') c
				 where c->>'type' = 'Available' and c->>'status' = 'True')
			from placement_status where placement = 'big'`).Scan(&selected, &available)
		if err == nil && (selected != objects+1 || available != 3) {
			err = fmt.Errorf("%d resources selected, %d members Available", selected, available)
		}
		return err
	})
	t.Logf("Available on 3 members with %d objects selected after %s", objects+1, time.Since(start).Round(time.Millisecond))

	var results, total int
	if err := env.Pool.QueryRow(t.Context(), `
		select jsonb_array_length(results), (counts->>'total')::int from apply_results
		where placement = 'big' and available order by observed_at desc limit 1`).Scan(&results, &total); err != nil {
		t.Fatal(err)
	}
	if total != objects+1 {
		t.Errorf("the last report counts %d manifests (and lists %d), want %d", total, results, objects+1)
	}
	counts := eventsWithinBound(t, env)
	for _, typ := range []string{events.TypeSnapshotCreated, events.TypeWorkReported} {
		if counts[typ] == 0 {
			t.Errorf("no %s on the stream", typ)
		}
	}
	if counts[events.TypeSnapshotCreated] < objects/events.MaxPieceClusters {
		t.Errorf("the snapshot of %d objects travelled in %d events, want %d pieces at least",
			objects+1, counts[events.TypeSnapshotCreated], objects/events.MaxPieceClusters)
	}
}
