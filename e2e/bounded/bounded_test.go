package bounded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// members is the size of the fleet.
const members = 5000

// bound is what one event may take on the bus: a piece's JSON and the
// CloudEvent headers.
const bound = events.MaxPieceBytes + 1<<10

// memberName is the i-th member's name, 63 bytes long, the longest allowed.
func memberName(i int) string {
	n := fmt.Sprintf("member-%05d-", i)
	return n + strings.Repeat("x", 63-len(n))
}

// TestPickAllOver5000MembersStaysBounded registers 5,000 members, places a
// namespace on all of them with PickAll, and waits until the rollout has
// sent work to every member and the status shows all 5,000 clusters with
// their rollout started. Then it reads the whole EVENTS stream: no message
// is over the bound of a piece.
func TestPickAllOver5000MembersStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("places a namespace on 5,000 members")
	}
	env := servicetest.New(t)
	opts := env.Options()
	start := time.Now()

	// The members join first, published in bulk.
	for i := range members {
		name := memberName(i)
		ev, err := events.New(events.TypeMemberJoined, "/flotilla/test", name, "", events.MemberJoined{Member: api.MemberCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"environment": "production"}},
			Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 600},
		}})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := bus.Encode(ev, subject(events.MemberSubject(name)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.JS.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID())); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-env.JS.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("publishing the members did not complete")
	}
	t.Logf("%d members published after %s", members, time.Since(start).Round(time.Millisecond))

	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	env.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: opts}) })
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	count := func(what, query string, args ...any) func() (int, error) {
		return func() (int, error) {
			var n int
			err := env.Pool.QueryRow(t.Context(), query, args...).Scan(&n)
			return n, err
		}
	}
	wait := func(what string, want int, n func() (int, error)) {
		t.Helper()
		poll.Every(t, 200*time.Millisecond, 3*time.Minute, what, func() error {
			got, err := n()
			if err == nil && got != want {
				err = fmt.Errorf("%d of %d", got, want)
			}
			return err
		})
		t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
	}
	joined := count("members", `select count(*) from member_clusters where state = 'joined'`)
	wait("the scheduler knows every member", members, joined)

	placement := memberName(0) // a placement name as long as a member's
	ns := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web","labels":{"app":"web"}}}`
	hubSubj, _ := events.HubResourceSubject("", "Namespace", "", "web")
	env.Publish(events.TypeHubResourceUpserted, hubSubj, events.HubResourceUpserted{Manifest: json.RawMessage(ns)})
	placeSubj, _ := events.PlacementSubject(placement)
	env.Publish(events.TypePlacementUpserted, placeSubj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: placement},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web"}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}})

	work := count("work", `select count(*) from rollout_clusters where placement = $1 and sent = 'work'`, placement)
	started := count("status", `
		select count(*) from placement_status s, jsonb_array_elements(s.status->'placementStatuses') ps, jsonb_array_elements(ps->'conditions') c
		where s.placement = $1 and c->>'type' = 'RolloutStarted' and c->>'status' = 'True'`, placement)
	decided := count("decision", `select coalesce(jsonb_array_length(decision->'chosen'), 0) from rollout_placements where name = $1`, placement)
	wait("the rollout sent work to every member", members, work)
	wait("the status shows every member with its rollout started", members, started)
	wait("the rollout's decision holds every member", members, decided)

	// fleetctl reads the whole placement, every output it has.
	fleetctl := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"--nats", env.NATSURL}, args...), cli.Options{
			Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatalf("fleetctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	asked := time.Now()
	var crp api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(fleetctl("get", "crp", placement, "-o", "json")), &crp); err != nil {
		t.Fatal(err)
	}
	if len(crp.Status.PlacementStatuses) != members {
		t.Errorf("fleetctl get crp -o json shows %d placementStatuses, want %d", len(crp.Status.PlacementStatuses), members)
	}
	got := time.Since(asked)
	described := fleetctl("describe", "crp", placement)
	if n := strings.Count(described, memberName(members-1)); n == 0 {
		t.Errorf("fleetctl describe crp does not show the last member %s", memberName(members-1))
	}
	t.Logf("fleetctl get crp -o json: %d placementStatuses in %s; describe: %d lines in %s",
		len(crp.Status.PlacementStatuses), got.Round(time.Millisecond), strings.Count(described, "\n"), (time.Since(asked) - got).Round(time.Millisecond))

	// One more member joins: the decision changes by one cluster, and so
	// does everything after it.
	scheduled := servicetest.Collect[events.PlacementScheduledV2](env, bus.SubjectsScheduling)
	env.Publish(events.TypeMemberJoined, subject(events.MemberSubject(memberName(members))), events.MemberJoined{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: memberName(members)},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 600},
	}})
	wait("the rollout sent work to the new member", members+1, work)
	wait("the status shows the new member with its rollout started", members+1, started)
	var raw []byte
	poll.Until(t, time.Minute, "the decision after one member joined", func() error {
		all := scheduled.All()
		last := all[len(all)-1]
		raw, _ = json.Marshal(last)
		if last.Revision != 2 || last.Base || last.Pieces != 1 || len(last.Clusters) != 1 || last.ChosenCount != members+1 {
			return fmt.Errorf("the last decision collected: %.500s", raw)
		}
		return nil
	})
	t.Logf("the decision after one member joined: one event, %d bytes of JSON", len(raw))

	// Every message on EVENTS, the member joins and the 5,000-cluster
	// decision, progress and status among them, is within the bound.
	byType := eventsWithinBound(t, env)
	for _, typ := range []string{events.TypePlacementScheduledV2, events.TypeRolloutProgressedV2, events.TypePlacementStatusChangedV2} {
		if byType[typ] == 0 {
			t.Errorf("no %s on the stream", typ)
		}
	}
	var quarantined int
	if err := env.Pool.QueryRow(t.Context(), `select count(*) from outbox where quarantined_at is not null`).Scan(&quarantined); err != nil || quarantined != 0 {
		t.Errorf("%d events quarantined (%v)", quarantined, errors.Join(err))
	}
}

// eventsWithinBound reads the whole EVENTS stream, checks that no message is
// over the bound of a piece, logs the largest of each type and returns how
// many of each there are.
func eventsWithinBound(t *testing.T, env *servicetest.Env) map[string]int {
	t.Helper()
	stream, err := env.JS.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	largest, counts := map[string]int{}, map[string]int{}
	for seen := uint64(0); seen < info.State.Msgs; seen++ {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("message %d of %d: %v", seen+1, info.State.Msgs, err)
		}
		size := len(msg.Data())
		for k, vs := range msg.Headers() {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		typ := msg.Headers().Get("ce-type")
		if size > bound {
			t.Errorf("a %s on %s is %d bytes, over %d", typ, msg.Subject(), size, bound)
		}
		largest[typ], counts[typ] = max(largest[typ], size), counts[typ]+1
	}
	types := make([]string, 0, len(counts))
	for typ := range counts {
		types = append(types, typ)
	}
	sort.Strings(types)
	for _, typ := range types {
		t.Logf("%-42s %6d events, the largest %7d bytes", typ, counts[typ], largest[typ])
	}
	return counts
}

func subject(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
