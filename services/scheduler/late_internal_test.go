package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// delivering hands the scheduler events as the consumer would, with the stream sequence
// and receive time chosen by the test: the only way to deliver an older event after a
// newer one on demand (the bus does so after a failed attempt).
type delivering struct {
	t   *testing.T
	env *servicetest.Env
	s   *Scheduler
	now time.Time
	n   int
}

func newDelivering(t *testing.T) *delivering {
	t.Helper()
	env := servicetest.New(t)
	d := &delivering{t: t, env: env, now: time.Now().UTC()}
	senv := &service.Env{Name: "scheduler", Source: "/flotilla/scheduler", NC: env.NC, JS: env.JS,
		Publisher: env.Publisher, Pool: env.Pool, Log: env.Logger()}
	d.s = newScheduler(senv, func() time.Time { return d.now }, 0)
	if err := d.s.load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

// deliver hands over one event with stream sequence seq, received now.
func (d *delivering) deliver(seq uint64, typ string, payload any) error {
	d.t.Helper()
	d.n++
	ev, err := events.New(typ, "/flotilla/test", "", events.ID("late-test", typ, strings.Repeat("x", d.n)), payload)
	if err != nil {
		d.t.Fatal(err)
	}
	return d.s.handle(d.t.Context(), []bus.Delivery{{Event: ev, Meta: bus.Meta{Sequence: seq, Time: d.now, Stream: bus.StreamEvents}}})
}

func (d *delivering) mustDeliver(seq uint64, typ string, payload any) {
	d.t.Helper()
	if err := d.deliver(seq, typ, payload); err != nil {
		d.t.Fatalf("event %d (%s): %v", seq, typ, err)
	}
}

// chosen is the clusters the placement's current decision chose.
func (d *delivering) chosen(name string) []string {
	d.t.Helper()
	var out []string
	err := pgx.BeginFunc(d.t.Context(), d.env.Pool, func(tx pgx.Tx) error {
		b, err := d.s.binding(d.t.Context(), tx, name)
		if b != nil {
			for _, c := range b.Chosen {
				out = append(out, c.Cluster)
			}
		}
		return err
	})
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

// stored is the placement's stored placement type and number of clusters.
func (d *delivering) stored(name string) (typ string, n int, deleted bool) {
	d.t.Helper()
	var count *int
	err := d.env.Pool.QueryRow(d.t.Context(), `select spec->'policy'->>'placementType', (spec->'policy'->>'numberOfClusters')::int, deleted
		from placements where name = $1`, name).Scan(&typ, &count, &deleted)
	if err != nil {
		d.t.Fatal(err)
	}
	if count != nil {
		n = *count
	}
	return typ, n, deleted
}

func joining(name string) events.MemberJoined {
	return events.MemberJoined{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 60},
	}}
}

func placement(name string, policy *api.PlacementPolicy) events.PlacementUpserted {
	return events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}},
			Policy:            policy,
		},
	}}
}

func pickN(n int32) *api.PlacementPolicy {
	return &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &n}
}

// An older placement.upserted delivered after a newer one does not revert the spec, and
// an older placement.deleted does not delete a placement upserted after it.
func TestLatePlacementEventsLose(t *testing.T) {
	d := newDelivering(t)
	d.mustDeliver(1, events.TypeMemberJoined, joining("member-1"))
	d.mustDeliver(2, events.TypeMemberJoined, joining("member-2"))
	d.mustDeliver(3, events.TypeMemberHeartbeat, &events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: d.now})
	d.mustDeliver(4, events.TypeMemberHeartbeat, &events.MemberHeartbeat{Name: "member-2", Healthy: true, ObservedAt: d.now})

	// Sequence 6 (two clusters) arrives before 5 (one cluster).
	d.mustDeliver(6, events.TypePlacementUpserted, placement("web", pickN(2)))
	d.mustDeliver(5, events.TypePlacementUpserted, placement("web", pickN(1)))
	if _, n, _ := d.stored("web"); n != 2 {
		t.Errorf("the late upsert set numberOfClusters to %d, want 2 from the newer one", n)
	}
	if got := d.chosen("web"); len(got) != 2 {
		t.Errorf("chosen %v, want both members", got)
	}

	// A deletion older than the upsert held is late too.
	d.mustDeliver(8, events.TypePlacementUpserted, placement("web", pickN(1)))
	d.mustDeliver(7, events.TypePlacementDeleted, &events.PlacementDeleted{Name: "web"})
	if _, n, deleted := d.stored("web"); deleted || n != 1 {
		t.Errorf("after a late deletion: deleted %v, numberOfClusters %d; want the placement of sequence 8", deleted, n)
	}
	d.mustDeliver(9, events.TypePlacementDeleted, &events.PlacementDeleted{Name: "web"})
	if _, _, deleted := d.stored("web"); !deleted {
		t.Error("a newer deletion was not taken")
	}
}

// An older member.joined delivered after member.left does not bring the member back,
// and older heartbeats and updates change nothing.
func TestLateMemberEventsLose(t *testing.T) {
	d := newDelivering(t)
	d.mustDeliver(1, events.TypeMemberJoined, joining("member-1"))
	d.mustDeliver(3, events.TypeMemberLeft, &events.MemberLeft{Name: "member-1"})
	d.mustDeliver(2, events.TypeMemberJoined, joining("member-1"))
	if m := d.s.members["member-1"]; m == nil || m.joined {
		t.Fatalf("a join older than the leave brought member-1 back: %+v", m)
	}
	var state string
	if err := d.env.Pool.QueryRow(t.Context(), `select state from member_clusters where name = 'member-1'`).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != "left" {
		t.Errorf("member-1 is %s in member_clusters, want left", state)
	}

	d.mustDeliver(4, events.TypeMemberJoined, joining("member-1"))
	upd := joining("member-1")
	upd.Member.Labels = map[string]string{"env": "old"}
	d.mustDeliver(6, events.TypeMemberUpdated, &events.MemberUpdated{Member: api.MemberCluster{
		TypeMeta: upd.Member.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "member-1", Labels: map[string]string{"env": "new"}},
		Spec: upd.Member.Spec}})
	d.mustDeliver(5, events.TypeMemberUpdated, &events.MemberUpdated{Member: upd.Member})
	if got := d.s.members["member-1"].mc.Labels["env"]; got != "new" {
		t.Errorf("label env = %q after a late update, want new", got)
	}
	before := d.s.members["member-1"].heartbeat
	d.now = d.now.Add(time.Minute)
	d.mustDeliver(5, events.TypeMemberHeartbeat, &events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: d.now})
	if got := d.s.members["member-1"].heartbeat; !got.Equal(before) {
		t.Errorf("a late heartbeat moved the last heartbeat from %s to %s", before, got)
	}
}

// A heartbeat claiming a time in the future does not keep a member that stopped beating
// eligible: the scheduler times heartbeats by when the bus received them.
func TestFutureHeartbeatDoesNotKeepADeadMemberEligible(t *testing.T) {
	d := newDelivering(t)
	d.mustDeliver(1, events.TypeMemberJoined, joining("honest"))
	d.mustDeliver(2, events.TypeMemberJoined, joining("liar"))
	d.mustDeliver(3, events.TypeMemberHeartbeat, &events.MemberHeartbeat{Name: "honest", Healthy: true, ObservedAt: d.now})
	d.mustDeliver(4, events.TypeMemberHeartbeat, &events.MemberHeartbeat{Name: "liar", Healthy: true, ObservedAt: d.now.Add(24 * time.Hour)})

	d.mustDeliver(5, events.TypePlacementUpserted, placement("now", nil))
	if got := d.chosen("now"); !slices.Equal(got, []string{"honest", "liar"}) {
		t.Fatalf("while both beat, chosen %v, want both", got)
	}
	// Both stop beating; ten minutes are more than three periods of a minute.
	d.now = d.now.Add(10 * time.Minute)
	d.mustDeliver(6, events.TypePlacementUpserted, placement("later", nil))
	if got := d.chosen("later"); len(got) != 0 {
		t.Errorf("ten minutes after the last heartbeats, chosen %v, want none (both missed heartbeats)", got)
	}
}

// An update that changes the placement type or removes a toleration is refused with
// its field path (dead-lettered), and the spec in force stays.
func TestRefusedUpdateKeepsTheSpec(t *testing.T) {
	d := newDelivering(t)
	d.mustDeliver(1, events.TypeMemberJoined, joining("member-1"))
	tol := &api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Tolerations: []api.Toleration{{Key: "gpu", Operator: api.TolerationOpExists}}}
	d.mustDeliver(2, events.TypePlacementUpserted, placement("web", tol))

	tests := []struct {
		policy *api.PlacementPolicy
		path   string
	}{
		{pickN(1), "spec.policy.placementType"},
		{&api.PlacementPolicy{PlacementType: api.PickAllPlacementType}, "spec.policy.tolerations"},
	}
	for i, tt := range tests {
		err := d.deliver(uint64(3+i), events.TypePlacementUpserted, placement("web", tt.policy))
		if !bus.IsPermanent(err) || !strings.Contains(err.Error(), tt.path) {
			t.Errorf("update %d: err = %v, want a permanent error naming %s", i, err, tt.path)
		}
		if typ, _, _ := d.stored("web"); typ != string(api.PickAllPlacementType) {
			t.Errorf("update %d: the stored type is %s", i, typ)
		}
	}
	// Recreating it after a deletion may change the type.
	d.mustDeliver(5, events.TypePlacementDeleted, &events.PlacementDeleted{Name: "web"})
	d.mustDeliver(6, events.TypePlacementUpserted, placement("web", pickN(1)))
	if typ, _, deleted := d.stored("web"); typ != string(api.PickNPlacementType) || deleted {
		t.Errorf("recreated: type %s deleted %v, want PickN", typ, deleted)
	}
}
