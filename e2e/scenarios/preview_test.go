package scenarios

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/preview"
)

// previewFile is a namespace and a ConfigMap the hub does not have yet, and a placement of
// them on three members, taking over what runs there.
func previewFile(takeover string) string {
	return `
apiVersion: v1
kind: Namespace
metadata:
  name: preview-web
  labels:
    app: preview-web
    team: green
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: preview-settings
  namespace: preview-web
data:
  color: green
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: preview-crp
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      version: v1
      name: preview-web
  policy:
    placementType: PickFixed
    clusterNames: [member-1, member-2, member-3]
  strategy:
    applyStrategy:
      whenToTakeOver: ` + takeover + `
    rollingUpdate:
      maxUnavailable: 1
      maxSurge: 1
`
}

// TestPreviewChangesNothing previews, on three real members, a placement that would take
// over a differing namespace on member-1 and create everything on member-2 and member-3:
// the answer shows both, with the difference, and nothing changed on any member, in
// PostgreSQL or on the bus's streams.
func TestPreviewChangesNothing(t *testing.T) {
	s := fleetFor(t)
	ctx := t.Context()
	// member-1 runs preview-web already, labelled team: blue where the hub says green.
	if _, err := s.member("member-1").CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "preview-web", Labels: map[string]string{"app": "preview-web", "team": "blue"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace preview-web on member-1: %v", err)
	}
	t.Cleanup(func() {
		_ = s.member("member-1").CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), "preview-web", metav1.DeleteOptions{})
	})
	members := []string{"member-1", "member-2", "member-3"}
	w := s.watchState(t)
	// What an earlier test left behind settles first (a namespace its cleanup deleted
	// may still be terminating on a member): the members' objects are compared below.
	poll.Every(t, time.Second, patience, "the members' namespaces and ConfigMaps to settle", func() error {
		first := w.snapshot(t, members).objects
		time.Sleep(time.Second)
		if !maps.Equal(first, w.snapshot(t, members).objects) {
			return errors.New("still changing")
		}
		return nil
	})
	heartbeatTables := w.heartbeatTables(t)

	before := w.snapshot(t, members)
	start := time.Now()
	out, errOut, err := s.fleetctl(ctx, previewFile("Always"), "apply", "--dry-run=server", "-f", "-", "-o", "json")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("fleetctl apply --dry-run=server: %v\n%s\n%s", err, out, errOut)
	}
	t.Logf("preview on 3 real members in %s", took.Round(time.Millisecond))
	var res preview.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("read the preview: %v\n%s", err, out)
	}
	checkAlwaysPreview(t, &res)

	// The same with IfNoDiff: the takeover is refused, with the same difference.
	table, errOut, err := s.fleetctl(ctx, previewFile("IfNoDiff"), "apply", "--dry-run=server", "-f", "-")
	if err != nil {
		t.Fatalf("fleetctl apply --dry-run=server (IfNoDiff): %v\n%s\n%s", err, table, errOut)
	}
	t.Logf("fleetctl apply --dry-run=server -f FILE:\n%s", table)
	for _, want := range []string{
		"member-1  v1 Namespace preview-web", "RefusedTakeOver", "/metadata/labels/team: member blue, hub green",
		"member-2  v1 Namespace preview-web", "Create", "v1 ConfigMap preview-web/preview-settings",
		"1      member-1 (add), member-2 (add), member-3 (add)",
		"# clusters: member-1, member-2, member-3",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}

	after := w.snapshot(t, members)
	before.expectSame(t, after, heartbeatTables)
	for _, m := range []string{"member-2", "member-3"} {
		if _, err := s.member(m).CoreV1().Namespaces().Get(ctx, "preview-web", metav1.GetOptions{}); err == nil {
			t.Errorf("namespace preview-web exists on %s after a preview", m)
		}
	}
}

// checkAlwaysPreview checks the preview of the placement with whenToTakeOver: Always.
func checkAlwaysPreview(t *testing.T, res *preview.Result) {
	t.Helper()
	if len(res.Placements) != 1 || len(res.Partial) != 0 {
		t.Fatalf("preview of %d placements, partial %v; want preview-crp, whole", len(res.Placements), res.Partial)
	}
	p := res.Placements[0]
	var chosen []string
	for _, c := range p.Scheduling.Chosen {
		chosen = append(chosen, c.Cluster)
	}
	if !slices.Equal(chosen, []string{"member-1", "member-2", "member-3"}) || !p.Scheduling.Fulfilled {
		t.Errorf("scheduling: chosen %v, fulfilled %v (%s); want member-1..3", chosen, p.Scheduling.Fulfilled, p.Scheduling.Message)
	}
	if len(p.Rollout.Resources) != 2 {
		t.Errorf("selected %v, want the file's namespace and ConfigMap", p.Rollout.Resources)
	}
	want := map[string]map[string]string{ // member -> kind -> outcome
		"member-1": {"Namespace": events.PreviewTakeOver, "ConfigMap": events.PreviewCreate},
		"member-2": {"Namespace": events.PreviewCreate, "ConfigMap": events.PreviewCreate},
		"member-3": {"Namespace": events.PreviewCreate, "ConfigMap": events.PreviewCreate},
	}
	for _, m := range p.Members {
		got := map[string]string{}
		for _, o := range m.Objects {
			got[o.Kind] = o.Outcome
			if m.Cluster == "member-1" && o.Kind == "Namespace" && !hasLabelDiff(o.Diffs, "blue", "green") {
				t.Errorf("the takeover on member-1 shows diffs %+v, want /metadata/labels/team blue (member) to green (hub)", o.Diffs)
			}
		}
		if !maps.Equal(got, want[m.Cluster]) {
			t.Errorf("%s: outcomes %v (error %q), want %v", m.Cluster, got, m.Error, want[m.Cluster])
		}
		delete(want, m.Cluster)
	}
	if len(want) > 0 {
		t.Errorf("no answer from %v", slices.Sorted(maps.Keys(want)))
	}
}

func hasLabelDiff(diffs []api.PatchDetail, member, hub string) bool {
	for _, d := range diffs {
		if d.Path == "/metadata/labels/team" && d.ValueInMember == member && d.ValueInHub == hub {
			return true
		}
	}
	return false
}

// stateWatch reads what a preview must not change: the members' objects, PostgreSQL's
// tables and the bus's streams.
type stateWatch struct {
	s    *stack
	conn *pgx.Conn
	js   jetstream.JetStream
}

func (s *stack) watchState(t *testing.T) *stateWatch {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the stack's database: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	nc, err := nats.Connect(s.NATSURL, nats.Name("e2e-preview"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &stateWatch{s: s, conn: conn, js: js}
}

// state is one reading: each member object's resourceVersion, each table's row count and
// content digest, and each stream subject's message count.
type state struct {
	objects  map[string]string
	tables   map[string]string
	subjects map[string]uint64
}

func (w *stateWatch) snapshot(t *testing.T, members []string) state {
	t.Helper()
	ctx := t.Context()
	st := state{objects: map[string]string{}, tables: map[string]string{}, subjects: map[string]uint64{}}
	for _, m := range members {
		nss, err := w.s.member(m).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range nss.Items {
			st.objects[m+" Namespace "+ns.Name] = ns.ResourceVersion
		}
		cms, err := w.s.member(m).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms.Items {
			st.objects[m+" ConfigMap "+cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
		}
	}
	rows, err := w.conn.Query(ctx, `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		var count int64
		var digest, mentions string
		// member-1's preview-web, made by this test, is in its heartbeats' namespaces
		// (rows of member state and the audit of heartbeats): those rows say nothing
		// of the preview.
		q := fmt.Sprintf(`select count(*), coalesce(md5(string_agg(t::text, '|' order by t::text)), ''),
			count(*) filter (where t::text like '%%preview-crp%%' or
				(t::text like '%%preview-web%%' and t::text not like '%%"namespaces"%%'))::text from %s t`, pgx.Identifier{table}.Sanitize())
		if err := w.conn.QueryRow(ctx, q).Scan(&count, &digest, &mentions); err != nil {
			t.Fatalf("read table %s: %v", table, err)
		}
		if mentions != "0" {
			t.Errorf("table %s has %s row(s) naming the previewed placement or its objects", table, mentions)
		}
		st.tables[table] = fmt.Sprintf("%d rows, md5 %s", count, digest)
	}
	for _, name := range []string{bus.StreamEvents, bus.StreamWork, bus.StreamDeadLetter} {
		stream, err := w.js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		st.subjects[name+" (all)"] = info.State.Msgs
		for subject, n := range info.State.Subjects {
			st.subjects[name+" "+subject] = n
		}
	}
	return st
}

// heartbeatTables are the tables that change while nothing but heartbeats happen: read
// twice, around a heartbeat of every member, with nothing else going on.
func (w *stateWatch) heartbeatTables(t *testing.T) map[string]bool {
	t.Helper()
	first := w.snapshot(t, nil)
	deadline := time.Now().Add(3 * heartbeatPeriod)
	for {
		time.Sleep(2 * time.Second)
		later := w.snapshot(t, nil)
		beats := 0
		for k, n := range later.subjects {
			if strings.HasSuffix(k, ".heartbeat") && n > first.subjects[k] {
				beats++
			}
		}
		if beats >= memberCount || time.Now().After(deadline) {
			// Time for the services to take the last one in.
			time.Sleep(3 * time.Second)
			later = w.snapshot(t, nil)
			changed := map[string]bool{}
			for table, v := range later.tables {
				if first.tables[table] != v {
					changed[table] = true
				}
			}
			t.Logf("tables heartbeats change: %v", slices.Sorted(maps.Keys(changed)))
			return changed
		}
	}
}

// expectSame fails for any change from st to after that heartbeats do not explain: a member
// object's resourceVersion, a stream subject's count other than a heartbeat's, or a table
// other than those heartbeats change (and those only when a heartbeat arrived).
func (st state) expectSame(t *testing.T, after state, heartbeatTables map[string]bool) {
	t.Helper()
	if !maps.Equal(st.objects, after.objects) {
		for k, v := range after.objects {
			if st.objects[k] != v {
				t.Errorf("member object %s: resourceVersion %q, was %q", k, v, st.objects[k])
			}
		}
		for k := range st.objects {
			if _, ok := after.objects[k]; !ok {
				t.Errorf("member object %s is gone", k)
			}
		}
	}
	beats := uint64(0)
	for k, n := range after.subjects {
		switch {
		case n == st.subjects[k]:
		case strings.HasSuffix(k, ".heartbeat"):
			beats += n - st.subjects[k]
		case strings.HasSuffix(k, " (all)"):
		default:
			t.Errorf("stream subject %s: %d messages, was %d", k, n, st.subjects[k])
		}
	}
	for _, name := range []string{bus.StreamWork, bus.StreamDeadLetter} {
		if k := name + " (all)"; after.subjects[k] != st.subjects[k] {
			t.Errorf("stream %s: %d messages, was %d", name, after.subjects[k], st.subjects[k])
		}
	}
	if k := bus.StreamEvents + " (all)"; after.subjects[k] != st.subjects[k]+beats {
		t.Errorf("stream %s: %d messages, was %d and %d heartbeats arrived", bus.StreamEvents, after.subjects[k], st.subjects[k], beats)
	}
	for table, v := range after.tables {
		if st.tables[table] == v {
			continue
		}
		if beats == 0 || !heartbeatTables[table] {
			t.Errorf("table %s: %s, was %s (%d heartbeats arrived meanwhile)", table, v, st.tables[table], beats)
		}
	}
	t.Logf("unchanged by the preview: %d member objects, %d tables, %d stream subjects (%d heartbeats arrived meanwhile)",
		len(after.objects), len(after.tables), len(after.subjects), beats)
}
