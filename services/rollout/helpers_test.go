package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// patience bounds every wait for the rollout service in these tests.
const patience = 30 * time.Second

// fixture is a real NATS server and a fresh PostgreSQL database with the
// rollout service running against them. The scheduler and apply workers are
// played by the test: it publishes their decisions and reports.
type fixture struct {
	*servicetest.Env
	t   *testing.T
	cfg rollout.Config
	// decisions counts the decision revisions published per placement.
	decisions map[string]int64
	sentinels int
}

func newFixture(t *testing.T, cfg rollout.Config) *fixture {
	t.Helper()
	env := servicetest.New(t)
	if cfg.SnapshotWindow == 0 {
		cfg.SnapshotWindow = 50 * time.Millisecond
	}
	if cfg.Tick == 0 {
		cfg.Tick = 20 * time.Millisecond
	}
	cfg.Options = env.Options()
	return &fixture{Env: env, t: t, cfg: cfg, decisions: map[string]int64{}}
}

// start runs a rollout service (a replica, if called again) until the
// returned stop is called or the test ends.
func (f *fixture) start() (stop func()) {
	return f.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, f.cfg) })
}

func (f *fixture) publish(typ, subject string, payload any) {
	f.t.Helper()
	f.Publish(typ, subject, payload)
}

// hub publishes manifests (JSON) to the hub store.
func (f *fixture) hub(manifests ...string) {
	f.t.Helper()
	for _, m := range manifests {
		var id struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct{ Name, Namespace string }
		}
		if err := json.Unmarshal([]byte(m), &id); err != nil {
			f.t.Fatalf("manifest %s: %v", m, err)
		}
		group, _, _ := strings.Cut(id.APIVersion, "/")
		if !strings.Contains(id.APIVersion, "/") {
			group = ""
		}
		subj, err := events.HubResourceSubject(group, id.Kind, id.Metadata.Namespace, id.Metadata.Name)
		if err != nil {
			f.t.Fatal(err)
		}
		f.publish(events.TypeHubResourceUpserted, subj, events.HubResourceUpserted{Manifest: json.RawMessage(m)})
	}
}

func (f *fixture) hubDelete(id api.ResourceIdentifier) {
	f.t.Helper()
	subj, err := events.HubResourceSubject(id.Group, id.Kind, id.Namespace, id.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(events.TypeHubResourceDeleted, subj, events.HubResourceDeleted{Resource: id})
}

// crp is a placement selecting what the selectors say, PickAll with the
// given rolling update.
func crp(name string, selectors ...api.ClusterResourceSelector) api.ClusterResourcePlacement {
	return api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.PlacementSpec{ResourceSelectors: selectors},
	}
}

func namespace(name string) api.ClusterResourceSelector {
	return api.ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: name}
}

func rolling(p api.ClusterResourcePlacement, maxUnavailable, maxSurge intstr.IntOrString, periodSeconds int) api.ClusterResourcePlacement {
	p.Spec.Strategy.Type = api.RollingUpdateRolloutStrategyType
	p.Spec.Strategy.RollingUpdate = &api.RollingUpdateConfig{MaxUnavailable: &maxUnavailable, MaxSurge: &maxSurge,
		UnavailablePeriodSeconds: &periodSeconds}
	return p
}

func (f *fixture) place(p api.ClusterResourcePlacement) {
	f.t.Helper()
	subj, _ := events.PlacementSubject(p.Name)
	f.publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: p})
}

func (f *fixture) deletePlacement(name string) {
	f.t.Helper()
	subj, _ := events.PlacementSubject(name)
	f.publish(events.TypePlacementDeleted, subj, events.PlacementDeleted{Name: name})
}

// schedule publishes a scheduling decision as the scheduler would, as the
// placement's next decision revision: a base of one piece listing the
// chosen clusters and the removed ones.
func (f *fixture) schedule(placement string, generation int64, chosen []string, removed map[string]string) {
	f.t.Helper()
	f.decisions[placement]++
	d := events.PlacementScheduledV2{Placement: placement, Revision: f.decisions[placement], Base: true, Pieces: 1,
		Generation: generation, PlacementType: api.PickAllPlacementType, Fulfilled: true, ChosenCount: len(chosen),
		Clusters: []events.ClusterDecision{}}
	for _, c := range chosen {
		d.Clusters = append(d.Clusters, events.ClusterDecision{Cluster: c, Action: events.ActionKept})
	}
	for _, c := range sortedKeys(removed) {
		d.Clusters = append(d.Clusters, events.ClusterDecision{Cluster: c, Action: events.ActionRemoved, Reason: removed[c]})
	}
	slices.SortFunc(d.Clusters, func(a, b events.ClusterDecision) int { return strings.Compare(a.Cluster, b.Cluster) })
	f.publishDecision(d)
}

// publishDecision publishes one piece of a decision revision.
func (f *fixture) publishDecision(d events.PlacementScheduledV2) {
	f.t.Helper()
	subj, _ := events.SchedulingSubject(d.Placement)
	f.publish(events.TypePlacementScheduledV2, subj, d)
}

func (f *fixture) leave(cluster string, policy events.LeavePolicy) {
	f.t.Helper()
	subj, _ := events.MemberSubject(cluster)
	f.publish(events.TypeMemberLeft, subj, events.MemberLeft{Name: cluster, LeavePolicy: policy})
}

// Report outcomes an apply worker could give.
var (
	applied      = events.Condition{Status: "True", Reason: api.ApplySucceededReason, Message: "Successfully applied 1 manifest(s)"}
	applyFail    = events.Condition{Status: "False", Reason: api.ApplyFailedReason, Message: "Failed to apply 1 of 1 manifest(s), please check the `failedPlacements` status"}
	available    = events.Condition{Status: "True", Reason: api.AvailableReason, Message: "All 1 manifest(s) are available"}
	notYet       = events.Condition{Status: "False", Reason: api.NotAvailableYetReason, Message: "1 of 1 manifest(s) are not available yet"}
	availUnknown = events.Condition{Status: "Unknown", Reason: api.AvailableUnknownReason}
)

// report publishes an apply worker's report for the work a cluster was sent.
func (f *fixture) report(w events.WorkDesired, appliedC, availableC events.Condition, manifests ...events.ManifestResult) {
	f.t.Helper()
	subj, _ := events.WorkStatusSubject(w.Cluster, w.Placement)
	f.publish(events.TypeWorkReported, subj, events.WorkReported{
		Cluster: w.Cluster, Placement: w.Placement, ResourceIndex: w.ResourceIndex, Generation: w.Generation,
		Manifests: manifests, Applied: appliedC, Available: availableC, ObservedAt: time.Now().UTC(),
	})
}

// emitted is an event the rollout emitted, read from its outbox: every
// event it decides to publish is there, in order, committed with the
// decision.
type emitted struct {
	id      string
	typ     string
	subject string
	data    []byte
}

func (f *fixture) emitted() []emitted {
	f.t.Helper()
	rows, err := f.Pool.Query(f.t.Context(), `select event_id, type, subject, payload from outbox order by id`)
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (emitted, error) {
		var e emitted
		err := r.Scan(&e.id, &e.typ, &e.subject, &e.data)
		return e, err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func decode[T any](t *testing.T, e emitted) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(e.data, &v); err != nil {
		t.Fatalf("decode %s: %v", e.typ, err)
	}
	return v
}

func (f *fixture) snapshots(placement string) []events.SnapshotCreated {
	var out []events.SnapshotCreated
	for _, e := range f.emitted() {
		if e.typ == events.TypeSnapshotCreated {
			if s := decode[events.SnapshotCreated](f.t, e); s.Placement == placement {
				out = append(out, s)
			}
		}
	}
	return out
}

// works returns the WorkDesired events sent to a cluster for a placement.
func (f *fixture) works(cluster, placement string) []events.WorkDesired {
	var out []events.WorkDesired
	for _, e := range f.emitted() {
		if e.typ == events.TypeWorkDesired {
			if w := decode[events.WorkDesired](f.t, e); w.Cluster == cluster && w.Placement == placement {
				out = append(out, w)
			}
		}
	}
	return out
}

func (f *fixture) tombstones(placement string) []events.WorkTombstoned {
	var out []events.WorkTombstoned
	for _, e := range f.emitted() {
		if e.typ == events.TypeWorkTombstoned {
			if w := decode[events.WorkTombstoned](f.t, e); w.Placement == placement {
				out = append(out, w)
			}
		}
	}
	return out
}

// progress assembles the progress revisions the rollout emitted for a
// placement, as the status service would, and returns the progress after
// each revision, in order.
func (f *fixture) progress(placement string) []revision.Progress {
	var (
		a   revision.Assembler[events.RolloutProgressedV2]
		p   revision.Progress
		out []revision.Progress
	)
	for _, e := range f.emitted() {
		if e.typ != events.TypeRolloutProgressedV2 {
			continue
		}
		piece := decode[events.RolloutProgressedV2](f.t, e)
		if piece.Placement != placement {
			continue
		}
		for _, pieces := range a.Add(piece) {
			if err := p.Apply(pieces); err != nil {
				f.t.Errorf("progress revision %d of %s: %v", pieces[0].Revision, placement, err)
			}
			out = append(out, p)
		}
	}
	if g, ok := a.Gap(); ok {
		f.t.Errorf("progress of %s: %s", placement, g)
	}
	return out
}

// waitProgress waits for a progress of the placement that ok accepts and
// returns it.
func (f *fixture) waitProgress(placement, what string, ok func(revision.Progress) error) revision.Progress {
	f.t.Helper()
	var got revision.Progress
	poll.Until(f.t, patience, what, func() error {
		all := f.progress(placement)
		if len(all) == 0 {
			return fmt.Errorf("no progress of %s yet", placement)
		}
		got = all[len(all)-1]
		if err := ok(got); err != nil {
			return fmt.Errorf("latest progress %s: %w", mustJSON(got), err)
		}
		return nil
	})
	return got
}

// waitWork waits for the latest work sent to a cluster to have the index.
// manifestsText is a work's manifests, one per line, for tests that look for values in them.
func manifestsText(w events.WorkDesired) string {
	lines := make([]string, len(w.Manifests))
	for i, m := range w.Manifests {
		lines[i] = string(m)
	}
	return strings.Join(lines, "\n")
}

func (f *fixture) waitWork(cluster, placement string, index int64) events.WorkDesired {
	f.t.Helper()
	var got events.WorkDesired
	poll.Until(f.t, patience, fmt.Sprintf("work %d for %s on %s", index, placement, cluster), func() error {
		ws := f.works(cluster, placement)
		if len(ws) == 0 {
			return fmt.Errorf("no work yet")
		}
		got = ws[len(ws)-1]
		if got.ResourceIndex != index {
			return fmt.Errorf("latest work has index %d", got.ResourceIndex)
		}
		return nil
	})
	return got
}

// waitReady waits until the clusters hold the placement's current work,
// applied and available, as the rollout sees it.
func (f *fixture) waitReady(placement string, clusters ...string) {
	f.t.Helper()
	poll.Until(f.t, patience, fmt.Sprintf("%v ready with %s", clusters, placement), func() error {
		rows, err := f.Pool.Query(f.t.Context(), `select cluster from rollout_clusters where placement = $1 and ready order by cluster`, placement)
		if err != nil {
			return err
		}
		ready, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, c := range clusters {
			if !slices.Contains(ready, c) {
				return fmt.Errorf("ready: %v", ready)
			}
		}
		return nil
	})
}

// started lists the clusters a progress reports started, sorted.
func started(p revision.Progress) []string {
	var out []string
	for _, c := range p.Clusters {
		if c.Started {
			out = append(out, c.Cluster)
		}
	}
	slices.Sort(out)
	return out
}

func clusterOf(p revision.Progress, name string) events.ClusterRollout {
	for _, c := range p.Clusters {
		if c.Cluster == name {
			return c
		}
	}
	return events.ClusterRollout{}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func resourceKeys(ids []api.ResourceIdentifier) []string {
	var out []string
	for _, id := range ids {
		out = append(out, strings.TrimPrefix(strings.Join([]string{id.Group, id.Version, id.Kind, id.Namespace, id.Name}, "/"), "/"))
	}
	return out
}
