package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/scheduler"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

type fixture struct {
	*servicetest.Env
	t         *testing.T
	decisions *servicetest.Collected[events.PlacementScheduledV2]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := servicetest.New(t)
	return &fixture{Env: env, t: t, decisions: servicetest.Collect[events.PlacementScheduledV2](env, bus.SubjectsScheduling)}
}

// startScheduler runs a scheduler until the returned stop is called.
func (f *fixture) startScheduler() (stop func()) {
	cfg := scheduler.Config{Options: f.Options()}
	return f.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, cfg) })
}

func (f *fixture) join(name string, labels map[string]string) {
	subj, _ := events.MemberSubject(name)
	f.Publish(events.TypeMemberJoined, subj, events.MemberJoined{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 60},
	}})
}

func (f *fixture) leave(name string) {
	subj, _ := events.MemberSubject(name)
	f.Publish(events.TypeMemberLeft, subj, events.MemberLeft{Name: name})
}

func (f *fixture) place(name string, n int32) {
	subj, _ := events.PlacementSubject(name)
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}},
			Policy: &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &n,
				Affinity: &api.Affinity{ClusterAffinity: &api.ClusterAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "production"}}}}}}}},
		},
	}})
}

// assembled puts the decision revisions published for placement together,
// as a consumer would, and returns the decision after each, in order.
func (f *fixture) assembled(placement string) []revision.Decision {
	f.t.Helper()
	var (
		a   revision.Assembler[events.PlacementScheduledV2]
		d   revision.Decision
		out []revision.Decision
	)
	for _, p := range f.decisions.All() {
		if p.Placement != placement {
			continue
		}
		for _, pieces := range a.Add(p) {
			if err := d.Apply(pieces); err != nil {
				f.t.Errorf("decision revision %d of %s: %v", pieces[0].Revision, placement, err)
			}
			out = append(out, d)
		}
	}
	return out
}

// latest waits for a decision for placement that satisfies ok.
func (f *fixture) latest(placement string, ok func(revision.Decision) error) revision.Decision {
	f.t.Helper()
	var last revision.Decision
	poll.Until(f.t, 20*time.Second, "decision for "+placement, func() error {
		all := f.assembled(placement)
		if len(all) == 0 {
			return fmt.Errorf("no decision for %s yet", placement)
		}
		last = all[len(all)-1]
		return ok(last)
	})
	return last
}

func (f *fixture) count(placement string) int {
	return len(f.assembled(placement))
}

func chosen(d revision.Decision) []string {
	var names []string
	for _, c := range d.Chosen {
		names = append(names, c.Cluster)
	}
	slices.Sort(names)
	return names
}

func wantChosen(want ...string) func(revision.Decision) error {
	return func(d revision.Decision) error {
		if got := chosen(d); !slices.Equal(got, want) {
			return fmt.Errorf("chosen %v, want %v", got, want)
		}
		return nil
	}
}

// TestPickNIsScheduledReplacedAndResumedAfterRestart follows a PickN
// placement through members joining, a chosen member leaving and a scheduler
// restart.
func TestPickNIsScheduledReplacedAndResumedAfterRestart(t *testing.T) {
	f := newFixture(t)
	stop := f.startScheduler()

	prod := map[string]string{"environment": "production"}
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		f.join(m, prod)
	}
	f.join("staging-1", map[string]string{"environment": "staging"})
	f.place("web", 2)

	d := f.latest("web", wantChosen("member-1", "member-2"))
	if !d.Fulfilled || d.Wanted != 2 {
		t.Fatalf("decision %+v: want fulfilled with 2 wanted", d)
	}
	// The history says why each cluster was picked, and why staging-1 was
	// not (a fulfilled decision shows no rejected cluster to its consumers).
	for _, c := range d.Chosen {
		want := fmt.Sprintf(`Successfully scheduled resources for placement in %q (affinity score: 0, topology spread score: 0): picked by scheduling policy`, c.Cluster)
		if got := f.historyReason("web", c.Cluster, "added"); got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
	if got := f.historyReason("web", "staging-1", "not-selected"); !strings.Contains(got, "does not match any required cluster selector term") {
		t.Errorf("staging-1 not recorded as rejected by affinity: %q", got)
	}
	if len(d.NotChosen) != 0 {
		t.Errorf("a fulfilled decision shows rejected clusters: %+v", d.NotChosen)
	}

	f.leave("member-1")
	d = f.latest("web", wantChosen("member-2", "member-3"))
	if len(d.Removed) != 1 || d.Removed[0].Cluster != "member-1" {
		t.Fatalf("removed %+v, want member-1", d.Removed)
	}

	// Asking for more than exist is unfulfilled and says why.
	f.place("wide", 5)
	d = f.latest("wide", wantChosen("member-2", "member-3"))
	if d.Fulfilled || !strings.Contains(d.Message, "found 2 of 5") {
		t.Fatalf("decision %+v: want unfulfilled saying found 2 of 5", d)
	}
	// It shows the clusters it could not choose, up to the 3 missing.
	if got := names(d.NotChosen); !slices.Equal(got, []string{"member-1", "staging-1"}) {
		t.Errorf("not chosen %v, want member-1 (left) and staging-1 (affinity)", got)
	}

	stop()
	before := f.count("web")
	f.startScheduler()
	// A resource-only change of another placement after the restart decides
	// only that placement: web is not re-decided.
	f.place("other", 1)
	f.latest("other", wantChosen("member-2"))
	f.join("member-4", prod) // fits, but web already has its 2 clusters
	f.latest("wide", wantChosen("member-2", "member-3", "member-4"))
	if n := f.count("web"); n != before {
		t.Fatalf("web was re-decided after the restart: %d decisions, had %d", n, before)
	}

	var rows int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from scheduling_decisions
		where placement = 'web' and cluster = 'member-1' and action = 'removed'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Fatalf("history has %d removal rows for member-1, want 1", rows)
	}
}

// TestReplicasDoNotDecideOnePlacementTwice runs two schedulers on one
// consumer and checks every decision for a placement extends the previous one.
func TestReplicasDoNotDecideOnePlacementTwice(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	f.startScheduler()
	prod := map[string]string{"environment": "production"}
	for i := range 6 {
		f.join(fmt.Sprintf("member-%d", i), prod)
	}
	// Two replicas take events side by side: a placement one of them decides while the
	// other still commits a join is decided without that member (PickN is sticky), as
	// it should be. The placements come once every join is in.
	poll.Until(t, 20*time.Second, "the six joins taken in", func() error {
		var n int
		if err := f.Pool.QueryRow(t.Context(), `select count(*) from member_clusters where state = 'joined'`).Scan(&n); err != nil {
			return err
		}
		if n != 6 {
			return fmt.Errorf("%d members joined", n)
		}
		return nil
	})
	for i := range 5 {
		f.place(fmt.Sprintf("app-%d", i), 3)
	}
	for i := range 5 {
		f.latest(fmt.Sprintf("app-%d", i), wantChosen("member-0", "member-1", "member-2"))
	}
	f.leave("member-0")
	for i := range 5 {
		d := f.latest(fmt.Sprintf("app-%d", i), wantChosen("member-1", "member-2", "member-3"))
		if len(d.Removed) != 1 {
			t.Errorf("app-%d: removed %+v, want member-0 once", i, d.Removed)
		}
	}
	var bindings int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from scheduler_bindings`).Scan(&bindings); err != nil {
		t.Fatal(err)
	}
	if bindings != 5 {
		t.Fatalf("%d bindings, want 5", bindings)
	}
}

func names(cs []events.ClusterDecision) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Cluster)
	}
	return out
}

// historyReason is the reason the history gives for the latest action on a
// cluster of a placement.
func (f *fixture) historyReason(placement, cluster, action string) string {
	f.t.Helper()
	var reason string
	if err := f.Pool.QueryRow(f.t.Context(), `select reason from scheduling_decisions
		where placement = $1 and cluster = $2 and action = $3 order by id desc limit 1`, placement, cluster, action).Scan(&reason); err != nil {
		f.t.Errorf("history of %s on %s (%s): %v", placement, cluster, action, err)
	}
	return reason
}

// TestDeletedPlacementDecisionsCountOn: a deleted placement's last decision
// is an empty base, and a re-created one's decisions count on from there, so
// a consumer never takes a new decision for a stale one.
func TestDeletedPlacementDecisionsCountOn(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	prod := map[string]string{"environment": "production"}
	f.join("member-1", prod)
	f.join("member-2", prod)
	f.place("web", 1)
	f.latest("web", wantChosen("member-1"))
	subj, _ := events.PlacementSubject("web")
	f.Publish(events.TypePlacementDeleted, subj, events.PlacementDeleted{Name: "web"})
	f.latest("web", wantChosen())
	f.place("web", 2)
	d := f.latest("web", wantChosen("member-1", "member-2"))

	var revs []string
	for _, p := range f.decisions.All() {
		if p.Placement == "web" {
			revs = append(revs, fmt.Sprintf("%d base=%v chosen=%d", p.Revision, p.Base, p.ChosenCount))
		}
	}
	if want := []string{"1 base=true chosen=1", "2 base=true chosen=0", "3 base=true chosen=2"}; !slices.Equal(revs, want) {
		t.Errorf("decisions %v, want %v", revs, want)
	}
	if d.Revision != 3 {
		t.Errorf("assembled revision %d, want 3", d.Revision)
	}
}

// A placement update the Fleet rules refuse, published straight to the bus, is
// dead-lettered with its field path in the reason, and the placement keeps its spec.
func TestRefusedUpdateIsDeadLetteredWithItsFieldPath(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	f.join("member-1", map[string]string{"environment": "production"})
	f.place("web", 1)
	subj, _ := events.PlacementSubject("web")
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web"}}},
	}})
	stream, err := f.JS.Stream(t.Context(), bus.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	poll.Until(t, time.Minute, "the refused update dead-lettered", func() error {
		msg, err := stream.GetLastMsgForSubject(t.Context(), bus.SubjectDeadLetterPrefix+"scheduler")
		if err != nil {
			return err
		}
		reason = msg.Header.Get(bus.HeaderDeadLetterReason)
		return nil
	})
	if !strings.Contains(reason, "spec.policy.placementType: cannot change from PickN to PickAll") {
		t.Errorf("dead letter reason %q does not name the field", reason)
	}
	var typ string
	if err := f.Pool.QueryRow(t.Context(), `select spec->'policy'->>'placementType' from placements where name = 'web'`).Scan(&typ); err != nil || typ != "PickN" {
		t.Errorf("placement type %q (%v), want PickN kept", typ, err)
	}
}
