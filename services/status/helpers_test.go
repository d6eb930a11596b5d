package status_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/status"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// t0 is when the test's story happens; events carry times from here on.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type fixture struct {
	*servicetest.Env
	t       testing.TB
	changes *servicetest.Collected[events.PlacementStatusChangedV2]
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	env := servicetest.New(t)
	return &fixture{Env: env, t: t, changes: servicetest.Collect[events.PlacementStatusChangedV2](env, bus.SubjectsStatus)}
}

// startStatus runs the status service until the test ends; its clock for
// member health is now.
func (f *fixture) startStatus(now time.Time) {
	cfg := status.Config{Options: f.Options(), Now: func() time.Time { return now }}
	f.Run("status", func(ctx context.Context) error { return status.Run(ctx, cfg) })
	// Queries are answered once the service is up.
	poll.Until(f.t, time.Minute, "the query service answers", func() error {
		_, err := f.NC.Request("$SRV.PING."+events.QueryService, nil, time.Second)
		return err
	})
}

func (f *fixture) statusChanges() []events.PlacementStatusChangedV2 {
	return f.changes.All()
}

// event builds an event with a deterministic id and time.
func (f *fixture) event(typ, id string, at time.Time, payload any) cloudevents.Event {
	f.t.Helper()
	ev, err := events.New(typ, "/flotilla/test", "", id, payload)
	if err != nil {
		f.t.Fatal(err)
	}
	ev.SetTime(at)
	return ev
}

// publish stores ev on subject through the bus, as a producer would.
func (f *fixture) publish(subject string, ev cloudevents.Event) {
	f.t.Helper()
	if _, err := f.Publisher.Publish(f.t.Context(), subject, ev); err != nil {
		f.t.Fatal(err)
	}
}

// redeliver stores a second copy of ev past the bus's duplicate detection,
// as when a producer retries after the duplicate window: the consumer sees
// the same event id twice.
func (f *fixture) redeliver(subject string, ev cloudevents.Event) {
	f.t.Helper()
	msg, err := bus.Encode(ev, subject)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.JS.PublishMsg(f.t.Context(), msg, jetstream.WithMsgID(ev.ID()+"-again")); err != nil {
		f.t.Fatal(err)
	}
}

// handled waits until the status service has handled the event with this id.
func (f *fixture) handled(id string) {
	f.t.Helper()
	poll.Until(f.t, time.Minute, "event "+id+" handled", func() error {
		var n int
		if err := f.Pool.QueryRow(f.t.Context(), `select count(*) from inbox where consumer = 'status' and event_id = $1`, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errors.New("not yet")
		}
		return nil
	})
}

// query asks the status service over NATS and decodes the reply.
func query[R any](f *fixture, endpoint string, q any) (events.QueryReply[R], micro.Headers) {
	f.t.Helper()
	data, err := json.Marshal(q)
	if err != nil {
		f.t.Fatal(err)
	}
	msg, err := f.NC.Request(events.QuerySubjectPrefix+endpoint, data, 10*time.Second)
	if err != nil {
		f.t.Fatalf("query %s: %v", endpoint, err)
	}
	var reply events.QueryReply[R]
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		f.t.Fatalf("query %s: reply %s: %v", endpoint, msg.Data, err)
	}
	return reply, micro.Headers(msg.Header)
}

// Seed 000's placement and members.

func webPlacement(mode api.WhenToTakeOverType) api.ClusterResourcePlacement {
	return api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-2-crp", Labels: map[string]string{"team": "web"}},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Group: "", Version: "v1", Kind: "Namespace",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-2"}}}},
			Policy: &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
			Strategy: api.RolloutStrategy{
				Type:          api.RollingUpdateRolloutStrategyType,
				ApplyStrategy: &api.ApplyStrategy{WhenToTakeOver: mode},
			},
		},
	}
}

func memberCluster(name string) api.MemberCluster {
	return api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"env": "prod"}},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 60},
	}
}

func subject(s string, err error) string {
	if err != nil {
		panic(fmt.Sprintf("subject: %v", err))
	}
	return s
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decision is revision rev of a placement's decisions as one piece listing
// every cluster (a base), fulfilled.
func decision(placement string, rev, generation int64, clusters ...events.ClusterDecision) events.PlacementScheduledV2 {
	d := events.PlacementScheduledV2{Placement: placement, Revision: rev, Base: true, Pieces: 1, Generation: generation,
		PlacementType: api.PickAllPlacementType, Fulfilled: true, Clusters: clusters}
	for _, c := range clusters {
		if c.Action == events.ActionAdded || c.Action == events.ActionKept {
			d.ChosenCount++
		}
	}
	return d
}

// progress is revision rev of a placement's rollout progress as one piece
// listing every cluster (a base).
func progress(placement string, rev, generation, index int64, clusters ...events.ClusterProgress) events.RolloutProgressedV2 {
	return events.RolloutProgressedV2{Placement: placement, Revision: rev, Base: true, Pieces: 1, Generation: generation,
		ResourceIndex: index, ClusterCount: len(clusters), Clusters: clusters}
}
