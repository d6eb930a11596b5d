package status_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	queryclient "github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// fleetSize is the fleet of the bounded-reply tests: the scale the design
// holds every message to.
const fleetSize = 5000

// wire watches the bus for the pieces of query replies (every message on an
// inbox that carries a piece number) and keeps the largest, headers included.
type wire struct {
	mu      sync.Mutex
	pieces  int
	last    int
	largest int
}

func watchReplies(t *testing.T, url string) *wire {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := &wire{}
	if _, err := nc.Subscribe("_INBOX.>", func(m *nats.Msg) {
		if m.Header.Get(events.QueryReplyPieceHeader) == "" {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.pieces++
		w.largest = max(w.largest, len(m.Data)+headerBytes(m.Header))
		if m.Header.Get(events.QueryReplyDigestHeader) != "" {
			w.last++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

// headerBytes is the size of h on the wire (NATS/1.0 and a line a value).
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// check waits until the watcher saw the last piece of replies replies, then
// holds every piece under the bound; it returns the largest message.
func (w *wire) check(t *testing.T, replies int) int {
	t.Helper()
	poll.Until(t, time.Minute, fmt.Sprintf("the last piece of %d replies on the wire", replies), func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.last < replies {
			return fmt.Errorf("%d pieces, %d of them last", w.pieces, w.last)
		}
		return nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	// The bound is on the data; headers take well under 1 KiB more.
	if bound := events.QueryReplyPieceBytes + 1<<10; w.largest > bound {
		t.Errorf("a reply message of %d bytes, over %d", w.largest, bound)
	}
	if w.pieces <= replies {
		t.Errorf("%d pieces for %d replies: the replies were not split, the test proves nothing", w.pieces, replies)
	}
	t.Logf("%d replies in %d pieces, the largest message %d bytes", replies, w.pieces, w.largest)
	return w.largest
}

// fleetctl runs fleetctl against the test's bus and fails the test if it fails.
func (f *fixture) fleetctl(args ...string) string {
	f.t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Run(f.t.Context(), append(args, "--nats", f.NATSURL), cli.Options{
		In: strings.NewReader(""), Out: &out, Err: &errOut,
		Getenv: func(string) string { return "" },
		Now:    func() time.Time { return t0 },
	})
	if err != nil {
		f.t.Fatalf("fleetctl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// bigStatus is a placement status naming n clusters, each as the status
// service folds member-1 in seed 000.
func bigStatus(t *testing.T, n int) api.PlacementStatus {
	t.Helper()
	raw, err := os.ReadFile("testdata/web-2-crp.status.json")
	if err != nil {
		t.Fatal(err)
	}
	var seed api.PlacementStatus
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatal(err)
	}
	template, err := json.Marshal(seed.PlacementStatuses[0])
	if err != nil {
		t.Fatal(err)
	}
	st := seed
	st.PlacementStatuses = make([]api.ResourcePlacementStatus, n)
	for i := range st.PlacementStatuses {
		cluster := fmt.Sprintf("member-%05d", i+1)
		if err := json.Unmarshal(bytes.ReplaceAll(template, []byte("member-1"), []byte(cluster)), &st.PlacementStatuses[i]); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// storePlacement stores the placement web-2-crp with a status naming
// clusters clusters, as the status service stores them, and returns it.
func (f *fixture) storePlacement(clusters int) api.ClusterResourcePlacement {
	t := f.t.(*testing.T)
	t.Helper()
	crp := webPlacement(api.WhenToTakeOverTypeIfNoDiff)
	api.SetDefaults(&crp)
	crp.Generation = 1
	crp.Status = bigStatus(t, clusters)
	status, err := json.Marshal(crp.Status)
	if err != nil {
		t.Fatal(err)
	}
	placement := crp
	placement.Status = api.PlacementStatus{}
	if _, err := f.Pool.Exec(t.Context(), `insert into status_placements (name, placement, generation) values ($1, $2, 1)`,
		crp.Name, mustMarshal(t, placement)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pool.Exec(t.Context(), `insert into placement_status (placement, status, observed_generation) values ($1, $2, 1)`,
		crp.Name, status); err != nil {
		t.Fatal(err)
	}
	t.Logf("stored %s with a status of %d bytes naming %d clusters", crp.Name, len(status), clusters)
	return crp
}

// TestGetAPlacementOnFiveThousandClusters: a placement whose status names
// 5,000 clusters (several MB, over NATS's 1 MB message limit) reaches
// fleetctl get -o json complete and exactly as stored, in reply messages
// under the bound.
func TestGetAPlacementOnFiveThousandClusters(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	w := watchReplies(t, f.NATSURL)
	crp := f.storePlacement(fleetSize)

	var got struct {
		Metadata struct{ Name string }
		Spec     json.RawMessage
		Status   json.RawMessage
	}
	if err := json.Unmarshal([]byte(f.fleetctl("get", "crp", crp.Name, "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := f.Pool.QueryRow(t.Context(), `select status from placement_status where placement = $1`, crp.Name).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, got.Status, stored) {
		t.Errorf("fleetctl get -o json shows a status other than the stored one")
	}
	if wantSpec, _ := json.Marshal(crp.Spec); got.Metadata.Name != crp.Name || !sameJSON(t, got.Spec, wantSpec) {
		t.Errorf("fleetctl get -o json shows %s with spec %s", got.Metadata.Name, got.Spec)
	}

	largest := w.check(t, 1)
	t.Logf("the largest reply message for a placement on %d clusters: %d bytes (bound %d)", fleetSize, largest, events.QueryReplyPieceBytes)
}

// TestEveryFormatOfAPlacementInPieces: every output format of fleetctl get,
// describe and wait read a placement whose reply takes several pieces.
func TestEveryFormatOfAPlacementInPieces(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	w := watchReplies(t, f.NATSURL)
	const clusters = 600 // over three pieces
	crp := f.storePlacement(clusters)
	last := fmt.Sprintf("member-%05d", clusters)

	var asJSON, asYAML api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(f.fleetctl("get", "crp", crp.Name, "-o", "json")), &asJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(f.fleetctl("get", "crp", crp.Name, "-o", "yaml")), &asYAML); err != nil {
		t.Fatal(err)
	}
	for format, got := range map[string]api.ClusterResourcePlacement{"json": asJSON, "yaml": asYAML} {
		if !reflect.DeepEqual(got.Status, crp.Status) {
			t.Errorf("fleetctl get -o %s shows another status", format)
		}
	}
	names := strings.Fields(f.fleetctl("get", "crp", crp.Name, "-o", "jsonpath={.status.placementStatuses[*].clusterName}"))
	if len(names) != clusters || names[0] != "member-00001" || names[clusters-1] != last {
		t.Errorf("-o jsonpath printed %d cluster names", len(names))
	}
	if out := f.fleetctl("get", "crp", crp.Name, "-o", "name"); out != "clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp\n" {
		t.Errorf("-o name printed %q", out)
	}
	for _, format := range []string{"table", "wide"} {
		lines := strings.Split(strings.TrimSpace(f.fleetctl("get", "crp", "-o", format)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[1], crp.Name) {
			t.Errorf("-o %s printed %q", format, lines)
		}
		if format == "wide" && !strings.HasSuffix(lines[1], fmt.Sprint(clusters)) {
			t.Errorf("-o wide does not count %d clusters: %q", clusters, lines[1])
		}
	}
	if out := f.fleetctl("describe", "crp", crp.Name); !strings.Contains(out, last) {
		t.Errorf("describe does not show the last cluster")
	}
	if out := f.fleetctl("wait", "crp", crp.Name, "--for=condition=Scheduled"); out != "clusterresourceplacement.placement.kubernetes-fleet.io/web-2-crp condition met\n" {
		t.Errorf("wait printed %q", out)
	}
	w.check(t, 8)
}

// TestListFiveThousandMembers: fleetctl get members lists a fleet of 5,000
// completely, in order and once each, the service paging through PostgreSQL
// and the reply travelling in messages under the bound.
func TestListFiveThousandMembers(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	w := watchReplies(t, f.NATSURL)

	// Stored as the status service stores joined members, in one COPY, in
	// reverse order so that the order of the answer is the query's.
	rows := make([][]any, 0, fleetSize)
	want := make([]string, fleetSize)
	for i := fleetSize; i >= 1; i-- {
		name := fmt.Sprintf("member-%05d", i)
		want[i-1] = name
		var in fold.MemberInputs
		in.Upsert(memberCluster(name), true, t0)
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, []any{name, raw, true, "join-" + name})
	}
	if _, err := f.Pool.CopyFrom(t.Context(), pgx.Identifier{"status_members"}, []string{"name", "inputs", "joined", "event_id"},
		pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}

	var list struct {
		Kind  string
		Items []api.MemberCluster
	}
	if err := json.Unmarshal([]byte(f.fleetctl("get", "members", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); list.Kind != "List" || !slices.Equal(got, want) {
		t.Errorf("fleetctl get members -o json: a %s of %d members, want the %d in order once each", list.Kind, len(got), len(want))
	}
	// The order and completeness are the service's, not only the printer's
	// (which sorts).
	nc, err := nats.Connect(f.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	members, err := queryclient.New(nc).Members(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(members); !slices.Equal(got, want) {
		t.Errorf("the service listed %d members, not the %d in order once each", len(got), len(want))
	}
	for _, format := range []string{"table", "name"} {
		if lines := strings.Split(strings.TrimSpace(f.fleetctl("get", "members", "-o", format)), "\n"); len(lines) < fleetSize || len(lines) > fleetSize+1 {
			t.Errorf("-o %s printed %d lines", format, len(lines))
		}
	}
	// A selector filters across pages.
	one, err := queryclient.New(nc).Members(t.Context(), api.MemberNameLabel+"=member-04321")
	if err != nil || len(one) != 1 || one[0].Name != "member-04321" {
		t.Errorf("the members of a selector: %v, %v", names(one), err)
	}

	w.check(t, 5)
}

func names(members []api.MemberCluster) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = m.Name
	}
	return out
}

// sameJSON compares two JSON documents as values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := errors.Join(json.Unmarshal(a, &x), json.Unmarshal(b, &y)); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestListPlacementsAcrossPages: a list of placements reads many pages of
// PostgreSQL and answers each live placement once, in order, filtered by
// the selector on every page.
func TestListPlacementsAcrossPages(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	const n = 95 // pages of 20, the last short
	var rows [][]any
	var want, odd []string
	for i := n; i >= 1; i-- {
		crp := webPlacement(api.WhenToTakeOverTypeAlways)
		crp.Name = fmt.Sprintf("crp-%03d", i)
		crp.Labels = map[string]string{"parity": []string{"even", "odd"}[i%2]}
		deleted := i%10 == 0
		rows = append(rows, []any{crp.Name, []byte(mustMarshal(t, crp)), deleted})
		if !deleted {
			want = append([]string{crp.Name}, want...)
			if i%2 == 1 {
				odd = append([]string{crp.Name}, odd...)
			}
		}
	}
	if _, err := f.Pool.CopyFrom(t.Context(), pgx.Identifier{"status_placements"}, []string{"name", "placement", "deleted"},
		pgx.CopyFromRows(rows)); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for selector, want := range map[string][]string{"": want, "parity=odd": odd} {
		list, err := queryclient.New(nc).Placements(t.Context(), selector)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(list))
		for i, p := range list {
			got[i] = p.Name
		}
		if !slices.Equal(got, want) {
			t.Errorf("placements with selector %q:\n%v\nwant\n%v", selector, got, want)
		}
	}
}
