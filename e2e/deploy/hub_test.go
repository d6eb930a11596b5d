package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/standalone/quickstart"
	"github.com/flotilla-dev/flotilla/services/status"
)

// hubPatience bounds each wait for the hub services.
const hubPatience = 2 * time.Minute

// hubStack is the scheduler, rollout and status services on a NATS server started from the
// rendered configuration, connected as the deploy connects them (user flotilla), with a real
// PostgreSQL; and each member's apply-worker credentials, as the deploy generates them.
type hubStack struct {
	r       rendered
	srv     *server.Server
	control *nats.Conn
	js      jetstream.JetStream
	pool    *pgxpool.Pool
	q       *query.Client
	members []string
	workers map[string]appsv1.Deployment
}

func startHub(t *testing.T) *hubStack {
	t.Helper()
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	s := startNATS(t, r)
	var sched appsv1.Deployment
	for _, d := range r.deployments(t) {
		if d.Name == "scheduler" {
			sched = d
		}
	}
	settings := deploymentNATS(t, r, sched, s)
	control := connect(t, settings.URL)
	js, err := jetstream.New(control)
	if err != nil {
		t.Fatal(err)
	}
	db := postgres.NewTestDB(t)
	pool, err := pgxpool.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// Forged events are dead-lettered with an error log line each: warnings and worse only.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := service.Options{NATS: settings, DatabaseURL: db, Logger: log}
	runService(t, "scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	runService(t, "rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: opts}) })
	runService(t, "status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	poll.Until(t, hubPatience, "the services' consumers", func() error {
		for _, c := range []string{bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus} {
			if _, err := js.Consumer(t.Context(), bus.StreamEvents, c); err != nil {
				return err
			}
		}
		return nil
	})
	workers := r.applyWorkers(t)
	return &hubStack{r: r, srv: s, control: control, js: js, pool: pool, q: query.New(control),
		members: keys(workers), workers: workers}
}

// runService runs a service until the test ends; an error other than the end fails the test.
func runService(t *testing.T, name string, run func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
}

// memberConn connects with member's apply-worker credentials and its own inbox prefix, as
// the worker does.
func (h *hubStack) memberConn(t *testing.T, member string) *nats.Conn {
	t.Helper()
	inbox, err := bus.MemberInboxPrefix(member)
	if err != nil {
		t.Fatal(err)
	}
	settings := deploymentNATS(t, h.r, h.workers[member], h.srv)
	nc, err := settings.Connect("apply-"+member, nats.CustomInboxPrefix(inbox), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connect as apply-%s: %v", member, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// publish publishes an event of typ on subject through JetStream, waiting for the stream.
func publish(t *testing.T, js jetstream.JetStream, source, typ, subject string, payload any) {
	t.Helper()
	ev, err := events.New(typ, source, subject, "", payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(js).Publish(t.Context(), subject, ev); err != nil {
		t.Fatalf("publish %s on %s: %v", typ, subject, err)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// onlyOn is the placement fixed to member alone.
func onlyOn(member string) string { return "only-" + member }

// sharedPlacement is on every member.
const sharedPlacement = "web"

func memberCluster(name string, labels map[string]string) api.MemberCluster {
	return api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		// The longest period: member health must not change while the test looks.
		Spec: api.MemberClusterSpec{HeartbeatPeriodSeconds: api.MaxHeartbeatPeriodSeconds},
	}
}

func namespaceManifest(name string, labels map[string]string) json.RawMessage {
	m := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": labels}}
	data, _ := json.Marshal(m)
	return data
}

func placement(name string, fixed ...string) api.ClusterResourcePlacement {
	p := api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}}},
	}
	if len(fixed) > 0 {
		p.Spec.Policy = &api.PlacementPolicy{PlacementType: api.PickFixedPlacementType, ClusterNames: fixed}
	}
	return p
}

// populate builds a fleet as an operator and its workers would: the members join and send
// heartbeats, the hub store holds a Namespace per placement, placement web is on every member
// and only-<m> on m alone; each worker reports its work applied and available with its own
// credentials. It returns once every placement is available and the services are idle.
func (h *hubStack) populate(t *testing.T) {
	t.Helper()
	const operator = "/flotilla/e2e/operator"
	names := []string{sharedPlacement}
	for _, m := range h.members {
		publish(t, h.js, operator, events.TypeMemberJoined, must(events.MemberSubject(m)),
			events.MemberJoined{Member: memberCluster(m, map[string]string{"team": "e2e"})})
		names = append(names, onlyOn(m))
	}
	for _, n := range names {
		publish(t, h.js, operator, events.TypeHubResourceUpserted, must(events.HubResourceSubject("", "Namespace", "", n)),
			events.HubResourceUpserted{Manifest: namespaceManifest(n, map[string]string{"app": n})})
	}
	for _, m := range h.members {
		mjs, err := jetstream.New(h.memberConn(t, m))
		if err != nil {
			t.Fatal(err)
		}
		publish(t, mjs, "/flotilla/apply/"+m, events.TypeMemberHeartbeat, must(events.HeartbeatSubject(m)),
			events.MemberHeartbeat{Name: m, Healthy: true, ObservedAt: time.Now().UTC()})
	}
	publish(t, h.js, operator, events.TypePlacementUpserted, must(events.PlacementSubject(sharedPlacement)),
		events.PlacementUpserted{Placement: placement(sharedPlacement)})
	for _, m := range h.members {
		publish(t, h.js, operator, events.TypePlacementUpserted, must(events.PlacementSubject(onlyOn(m))),
			events.PlacementUpserted{Placement: placement(onlyOn(m), m)})
	}
	for _, m := range h.members {
		h.reportWork(t, m, sharedPlacement, onlyOn(m))
	}
	for _, n := range names {
		poll.Until(t, hubPatience, "placement "+n+" available", func() error {
			crp, err := h.q.Placement(t.Context(), n)
			if err != nil {
				return err
			}
			if !quickstart.Converged(crp, true) {
				return fmt.Errorf("conditions %v", crp.Status.Conditions)
			}
			return nil
		})
	}
	h.settle(t)
}

// reportWork waits for member's desired state of each placement and reports it applied and
// available, publishing with the member's own credentials.
func (h *hubStack) reportWork(t *testing.T, member string, placements ...string) {
	t.Helper()
	mjs, err := jetstream.New(h.memberConn(t, member))
	if err != nil {
		t.Fatal(err)
	}
	work, err := h.js.Stream(t.Context(), bus.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range placements {
		var w *events.WorkDesired
		poll.Until(t, hubPatience, "work of "+p+" for "+member, func() error {
			raw, err := work.GetLastMsgForSubject(t.Context(), must(events.WorkSubject(member, p)))
			if err != nil {
				return err
			}
			ev, err := bus.Decode(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
			if err != nil {
				return err
			}
			w, err = events.DecodeAs[events.WorkDesired](ev)
			return err
		})
		ok := events.Condition{Status: "True", Reason: "Applied"}
		var results []events.ManifestResult
		for _, raw := range w.Manifests {
			var obj struct {
				APIVersion, Kind string
				Metadata         struct{ Name, Namespace string }
			}
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			results = append(results, events.ManifestResult{
				Resource:  api.ResourceIdentifier{Version: obj.APIVersion, Kind: obj.Kind, Name: obj.Metadata.Name, Namespace: obj.Metadata.Namespace},
				Applied:   ok,
				Available: events.Condition{Status: "True", Reason: api.ManifestAvailableReason},
			})
		}
		publish(t, mjs, "/flotilla/apply/"+member, events.TypeWorkReported, must(events.WorkStatusSubject(member, p)), events.WorkReported{
			Cluster: member, Placement: p, ResourceIndex: w.ResourceIndex, Generation: w.Generation, Manifests: results,
			Applied: ok, Available: events.Condition{Status: "True", Reason: api.AvailableReason}, ObservedAt: time.Now().UTC(),
		})
	}
}

// settle waits until the services have handled (or dead-lettered) everything on the bus and
// published everything they enqueued.
func (h *hubStack) settle(t *testing.T) {
	t.Helper()
	poll.Until(t, hubPatience, "the services idle", func() error {
		for _, c := range []string{bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus} {
			cons, err := h.js.Consumer(t.Context(), bus.StreamEvents, c)
			if err != nil {
				return err
			}
			if i := cons.CachedInfo(); i.NumPending != 0 || i.NumAckPending != 0 {
				return fmt.Errorf("%s: %d pending, %d unacknowledged", c, i.NumPending, i.NumAckPending)
			}
		}
		var unpublished int
		if err := h.pool.QueryRow(t.Context(), `select count(*) from outbox where published_at is null`).Scan(&unpublished); err != nil {
			return err
		}
		if unpublished != 0 {
			return fmt.Errorf("%d outbox rows unpublished", unpublished)
		}
		return nil
	})
}

// world is everything a forged event could change: every table of the hub's database, what
// the status service answers about members and placements, and how many messages each
// subject of each stream holds.
type world struct {
	tables     map[string]string
	members    string
	placements string
	subjects   map[string]uint64 // "<stream> <subject>" -> messages
}

// world reads the world. The rows of the audit log and the inbox about the events in
// recorded are left out: an event a consumer admits is recorded as consumed, which is the
// audit log's purpose, whatever else it changes.
func (h *hubStack) world(t *testing.T, recorded ...string) world {
	t.Helper()
	w := world{tables: map[string]string{}, subjects: map[string]uint64{}}
	rows, err := h.pool.Query(t.Context(), `select table_name from information_schema.tables
		where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		var dump string
		q := fmt.Sprintf(`select coalesce(jsonb_agg(to_jsonb(x) order by to_jsonb(x)::text), '[]')::text from %s x`,
			pgx.Identifier{table}.Sanitize())
		if table == "audit_log" || table == "inbox" {
			q += ` where not (x.event_id = any($1))`
		} else {
			q += ` where $1::text[] is not null`
		}
		if recorded == nil {
			recorded = []string{}
		}
		if err := h.pool.QueryRow(t.Context(), q, recorded).Scan(&dump); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		w.tables[table] = dump
	}
	ms, err := h.q.Members(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := h.q.Placements(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	w.members, w.placements = jsonOf(t, ms), jsonOf(t, ps)
	for _, name := range []string{bus.StreamEvents, bus.StreamWork, bus.StreamDeadLetter, bus.StreamWorkBlobs, bus.StreamHubBlobs} {
		st, err := h.js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for subj, n := range info.State.Subjects {
			w.subjects[name+" "+subj] = n
		}
	}
	return w
}

func jsonOf(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// changedSubjects lists the stream subjects whose message count differs between a and b.
func changedSubjects(a, b world) []string {
	var out []string
	for k, n := range b.subjects {
		if a.subjects[k] != n {
			out = append(out, k)
		}
	}
	for k := range a.subjects {
		if _, ok := b.subjects[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// deadLetters reads every dead letter of the hub's consumers: by consumer, then event id.
func (h *hubStack) deadLetters(t *testing.T) map[string]map[string]nats.Header {
	t.Helper()
	out := map[string]map[string]nats.Header{}
	cons, err := h.js.OrderedConsumer(t.Context(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.DeadLetterSubject(bus.ConsumerScheduler), bus.DeadLetterSubject(bus.ConsumerRollout),
			bus.DeadLetterSubject(bus.ConsumerStatus)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			c := m.Headers().Get(bus.HeaderDeadLetterConsumer)
			if out[c] == nil {
				out[c] = map[string]nats.Header{}
			}
			out[c][m.Headers().Get("ce-id")] = m.Headers()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
	}
}

// consumersOf lists the hub consumers whose filter takes subject.
func consumersOf(subject string) []string {
	var out []string
	for _, c := range (bus.TopologyOptions{}).Consumers() {
		if len(c.FilterSubjects) == 0 || slices.ContainsFunc(c.FilterSubjects, func(f string) bool { return server.SubjectMatchesFilter(subject, f) }) {
			out = append(out, c.Durable)
		}
	}
	return out
}

// inEvents reports whether subject is stored in the EVENTS stream.
func inEvents(subject string) bool {
	for _, s := range bus.DefaultTopology.Streams() {
		if s.Name == bus.StreamEvents {
			return slices.ContainsFunc(s.Subjects, func(f string) bool { return server.SubjectMatchesFilter(subject, f) })
		}
	}
	return false
}
