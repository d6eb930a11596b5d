package rollout_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// The web-2 namespace as `kubectl get -o json` prints it, with what the API
// server added, and its contents.
const (
	web2Namespace = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-2","labels":{"app":"web-2"},
		"uid":"1b2c3d","resourceVersion":"898","creationTimestamp":"2023-08-30T02:26:57Z"},"status":{"phase":"Active"}}`
	web2Deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web-2","generation":1,
		"resourceVersion":"7","managedFields":[{"manager":"kubectl"}]},
		"spec":{"replicas":2,"selector":{"matchLabels":{"run":"web"}},"template":{"metadata":{"creationTimestamp":null,"labels":{"run":"web"}},
		"spec":{"containers":[{"name":"web","image":"nginx"}]}}},"status":{"availableReplicas":2}}`
	web2Service = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"web-2"},
		"spec":{"clusterIP":"10.96.72.40","clusterIPs":["10.96.72.40"],"ports":[{"port":80}],"selector":{"run":"web"}}}`
	web2Envelope = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"envelope","namespace":"web-2",
		"annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},
		"data":{"quota.yaml":"apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: mem\n  namespace: web-2\nspec:\n  hard:\n    requests.cpu: \"1\"\n"}}`
	web3Namespace  = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-3","labels":{"app":"web-3"}}}`
	web3Deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api","namespace":"web-3"},"spec":{"replicas":1}}`
)

func configMap(namespace, name, value string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":{"value":%q}}`, name, namespace, value)
}

func namespaceManifest(name string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, name)
}

func TestSelectsANamespaceWithItsContents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(web2Namespace, web2Deployment, web2Service, web2Envelope, web3Namespace, web3Deployment)
	f.place(crp("web-2-crp", api.ClusterResourceSelector{Version: "v1", Kind: "Namespace",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-2"}}}))
	f.schedule("web-2-crp", 1, []string{"member-1", "member-2"}, nil)

	var snap events.SnapshotCreated
	poll.Until(t, patience, "first snapshot", func() error {
		s := f.snapshots("web-2-crp")
		if len(s) == 0 {
			return errors.New("no snapshot yet")
		}
		snap = s[0]
		return nil
	})
	want := []string{"v1/Namespace//web-2", "v1/ConfigMap/web-2/envelope", "v1/Service/web-2/web", "apps/v1/Deployment/web-2/web"}
	if got := resourceKeys(snap.SelectedResources); !slices.Equal(got, want) {
		t.Errorf("selected %v, want %v (the namespace, then its contents, the envelope as itself)", got, want)
	}
	if snap.Index != 0 || !strings.HasPrefix(snap.Hash, "sha256:") {
		t.Errorf("snapshot index %d hash %q, want index 0 and a sha256 hash", snap.Index, snap.Hash)
	}

	for _, cluster := range []string{"member-1", "member-2"} {
		w := f.waitWork(cluster, "web-2-crp", 0)
		if w.ResourceHash != snap.Hash || w.Generation != 1 || len(w.Manifests) != 4 {
			t.Errorf("%s: work hash %s generation %d with %d manifests", cluster, w.ResourceHash, w.Generation, len(w.Manifests))
		}
		all := mustJSON(w.Manifests)
		for _, server := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "status", "clusterIP", `"generation"`} {
			if strings.Contains(all, server) {
				t.Errorf("%s: the manifests still carry %s: %s", cluster, server, all)
			}
		}
		if w.ApplyStrategy.Type != api.ApplyStrategyTypeClientSideApply || w.ApplyStrategy.WhenToTakeOver != api.WhenToTakeOverTypeAlways ||
			w.DeleteStrategy.PropagationPolicy != api.DeletePropagationPolicyDelete || w.UnavailablePeriodSeconds != 60 {
			t.Errorf("%s: strategies %+v %+v period %d, want the defaults", cluster, w.ApplyStrategy, w.DeleteStrategy, w.UnavailablePeriodSeconds)
		}
	}
	// The relay put the desired state on the WORK stream, last value per subject.
	subject, _ := events.WorkSubject("member-1", "web-2-crp")
	poll.Until(t, patience, "work on the WORK stream", func() error {
		s, err := f.JS.Stream(t.Context(), bus.StreamWork)
		if err != nil {
			return err
		}
		m, err := s.GetLastMsgForSubject(t.Context(), subject)
		if err != nil {
			return err
		}
		if typ := m.Header.Get("ce-type"); typ != events.TypeWorkDesired {
			return fmt.Errorf("last message is %s", typ)
		}
		return nil
	})
	f.waitProgress("web-2-crp", "both clusters started", func(p revision.Progress) error {
		if got := started(p); !slices.Equal(got, []string{"member-1", "member-2"}) {
			return fmt.Errorf("started %v", got)
		}
		if c := clusterOf(p, "member-1"); c.Reason != api.RolloutStartedReason || c.ResourceIndex != 0 {
			return fmt.Errorf("member-1 %+v", c)
		}
		return nil
	})
}

func TestSelectsClusterScopedKindsByNameAndLabels(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader","labels":{"tier":"read"}},"rules":[]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"writer","labels":{"tier":"write"}},"rules":[]}`,
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},"spec":{"group":"example.com"}}`,
		`{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ClusterResourceEnvelope","metadata":{"name":"priorities"},
			"data":{"high.yaml":{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"high"},"value":1000}}}`,
	)
	p := crp("cluster-wide",
		api.ClusterResourceSelector{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole",
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"read"}}}}},
		api.ClusterResourceSelector{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com"},
		api.ClusterResourceSelector{Group: "placement.kubernetes-fleet.io", Version: "v1beta1", Kind: "ClusterResourceEnvelope", Name: "priorities"},
	)
	f.place(p)
	f.schedule("cluster-wide", 1, []string{"member-1"}, nil)
	w := f.waitWork("member-1", "cluster-wide", 0)
	snap := f.snapshots("cluster-wide")[0]
	want := []string{
		"apiextensions.k8s.io/v1/CustomResourceDefinition//widgets.example.com",
		"placement.kubernetes-fleet.io/v1beta1/ClusterResourceEnvelope//priorities",
		"rbac.authorization.k8s.io/v1/ClusterRole//reader",
	}
	if got := resourceKeys(snap.SelectedResources); !slices.Equal(got, want) {
		t.Errorf("selected %v, want %v", got, want)
	}
	if len(w.Manifests) != 3 {
		t.Errorf("work carries %d manifests, want 3", len(w.Manifests))
	}

	// A namespaced kind selected directly makes the selectors invalid; the
	// placement keeps what it has and says why.
	p.Spec.ResourceSelectors = append(p.Spec.ResourceSelectors, api.ClusterResourceSelector{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"})
	f.place(p)
	f.waitProgress("cluster-wide", "InvalidResourceSelectors", func(pr revision.Progress) error {
		c := clusterOf(pr, "member-1")
		if c.Reason != api.InvalidResourceSelectorsReason {
			return fmt.Errorf("member-1 reason %q", c.Reason)
		}
		if want := "resourceSelectors[3] (apps/v1 Deployment web): Deployment is a namespaced kind"; !strings.Contains(c.Message, want) {
			return fmt.Errorf("message %q lacks %q", c.Message, want)
		}
		return nil
	})
	if n := len(f.snapshots("cluster-wide")); n != 1 {
		t.Errorf("%d snapshots after the invalid selectors, want still 1", n)
	}
}

func TestSnapshotsKeepRevisionHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("app"), configMap("app", "settings", "v0"))
	p := crp("app", namespace("app"))
	p.Spec.RevisionHistoryLimit = new(int32(2))
	f.place(p)
	f.schedule("app", 1, []string{"member-1"}, nil)

	waitSnapshots := func(n int) []events.SnapshotCreated {
		t.Helper()
		var s []events.SnapshotCreated
		poll.Until(t, patience, fmt.Sprintf("%d snapshots", n), func() error {
			if s = f.snapshots("app"); len(s) < n {
				return fmt.Errorf("%d snapshots", len(s))
			}
			return nil
		})
		return s
	}
	waitSnapshots(1)
	for i := 1; i <= 3; i++ {
		f.hub(configMap("app", "settings", fmt.Sprintf("v%d", i)))
		waitSnapshots(i + 1)
	}
	// The same content again cuts nothing: the next change is index 4.
	f.hub(configMap("app", "settings", "v3"))
	f.hub(configMap("app", "settings", "v4"))
	waitSnapshots(5)
	// Deleting the ConfigMap from the hub is a change too.
	f.hubDelete(api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "app", Name: "settings"})
	snaps := waitSnapshots(6)
	if len(snaps) != 6 {
		t.Fatalf("%d snapshots, want 6", len(snaps))
	}
	hashes := map[string]bool{}
	for i, s := range snaps {
		if s.Index != int64(i) {
			t.Errorf("snapshot %d has index %d", i, s.Index)
		}
		hashes[s.Hash] = true
	}
	if len(hashes) != 6 {
		t.Errorf("%d distinct hashes in 6 snapshots", len(hashes))
	}
	if got := resourceKeys(snaps[5].SelectedResources); !slices.Equal(got, []string{"v1/Namespace//app"}) {
		t.Errorf("after the delete the snapshot selects %v", got)
	}

	// Every index and hash stays for audit; only the newest two keep their manifests.
	rows, err := f.Pool.Query(t.Context(), `select snapshot_index, content_hash, manifests is not null, pruned_at is not null,
			jsonb_array_length(selected_resources)
		from resource_snapshots where placement = 'app' order by snapshot_index`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var (
			index, selected int
			hash            string
			kept, pruned    bool
		)
		if err := rows.Scan(&index, &hash, &kept, &pruned, &selected); err != nil {
			t.Fatal(err)
		}
		wantKept := index >= 4
		if hash != snaps[i].Hash || kept != wantKept || pruned == wantKept || selected == 0 {
			t.Errorf("snapshot %d: hash %s (emitted %s), manifests kept %v, pruned %v, %d selected; want kept %v",
				index, hash, snaps[i].Hash, kept, pruned, selected, wantKept)
		}
		i++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if i != 6 {
		t.Errorf("%d snapshot rows, want 6", i)
	}
	// The cluster got the latest content.
	f.waitWork("member-1", "app", 5)
}

func TestABurstOfHubChangesMakesOneSnapshot(t *testing.T) {
	t.Parallel()
	// A window long enough that the whole burst lands in it.
	f := newFixture(t, rollout.Config{SnapshotWindow: 3 * time.Second})
	f.start()
	f.hub(namespaceManifest("burst"))
	f.place(crp("burst", namespace("burst")))
	f.schedule("burst", 1, []string{"member-1"}, nil)
	f.waitWork("member-1", "burst", 0)

	const n = 20
	var burst []string
	for i := range n {
		burst = append(burst, configMap("burst", fmt.Sprintf("cm-%02d", i), "x"))
	}
	f.hub(burst...)
	var snaps []events.SnapshotCreated
	poll.Until(t, patience, "the burst's snapshot", func() error {
		snaps = f.snapshots("burst")
		last := snaps[len(snaps)-1]
		if len(last.SelectedResources) != n+1 {
			return fmt.Errorf("latest snapshot %d selects %d objects", last.Index, len(last.SelectedResources))
		}
		return nil
	})
	if len(snaps) != 2 {
		t.Errorf("the burst made %d snapshots, want 1 (indexes %v)", len(snaps)-1, snaps)
	}
	f.waitWork("member-1", "burst", 1)
}

// TestABurstAboutOneObjectEndsWithItsLastEvent: hub events handled together
// (one round trip for a batch of them) keep their order: of three versions
// of one object, the placement gets the last, and an object deleted in the
// same burst leaves it.
func TestABurstAboutOneObjectEndsWithItsLastEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("last"), configMap("last", "kept", "v0"), configMap("last", "gone", "x"))
	f.place(crp("last", namespace("last")))
	f.schedule("last", 1, []string{"member-1"}, nil)
	f.waitWork("member-1", "last", 0)

	f.hub(configMap("last", "kept", "v1"), configMap("last", "kept", "v2"))
	f.hubDelete(api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "last", Name: "gone"})
	f.hub(configMap("last", "kept", "v3"))
	poll.Until(t, patience, "work with the burst's last state", func() error {
		ws := f.works("member-1", "last")
		w := ws[len(ws)-1]
		all := manifestsText(w)
		if len(w.Manifests) != 2 || !strings.Contains(all, `"v3"`) || strings.Contains(all, `"gone"`) {
			return fmt.Errorf("latest work (index %d) carries %s", w.ResourceIndex, all)
		}
		return nil
	})
}

// TestTheLastChangeOfABurstIsSnapshottedAtOnce: a hub change waits for the
// coalescing window, unless its publisher marks the end of its burst
// (events.MarkLast, as fleetctl apply does): then the snapshot is cut at
// once, with the changes that waited.
func TestTheLastChangeOfABurstIsSnapshottedAtOnce(t *testing.T) {
	t.Parallel()
	// A window no test waits out.
	f := newFixture(t, rollout.Config{SnapshotWindow: time.Hour, SnapshotMaxWait: time.Hour})
	f.start()
	f.hub(namespaceManifest("marked"), configMap("marked", "a", "v0"), configMap("marked", "b", "v0"))
	f.place(crp("marked", namespace("marked")))
	f.schedule("marked", 1, []string{"member-1"}, nil)
	f.waitWork("member-1", "marked", 0)

	f.hub(configMap("marked", "a", "v1"))
	time.Sleep(500 * time.Millisecond)
	if n := len(f.snapshots("marked")); n != 1 {
		t.Fatalf("an unmarked change cut a snapshot within the window (%d snapshots)", n)
	}
	subject, err := events.HubResourceSubject("", "ConfigMap", "marked", "b")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.New(events.TypeHubResourceUpserted, "/flotilla/test", "", "",
		events.HubResourceUpserted{Manifest: json.RawMessage(configMap("marked", "b", "v1"))})
	if err != nil {
		t.Fatal(err)
	}
	events.MarkLast(&ev)
	if _, err := f.Publisher.Publish(t.Context(), subject, ev); err != nil {
		t.Fatal(err)
	}
	w := f.waitWork("member-1", "marked", 1)
	all := manifestsText(w)
	if strings.Count(all, `"value":"v1"`) != 2 {
		t.Errorf("the snapshot cut at the burst's end does not carry both changes: %s", all)
	}
}

func TestANewPlacementWhoseObjectsAreKnownIsSnapshottedAtOnce(t *testing.T) {
	t.Parallel()
	// A window no test waits out: the snapshot can only come without it.
	f := newFixture(t, rollout.Config{SnapshotWindow: time.Hour, SnapshotMaxWait: time.Hour})
	f.start()
	// As fleetctl apply publishes a file that lists the objects first.
	f.hub(namespaceManifest("early"), configMap("early", "a", "x"), configMap("early", "b", "x"))
	f.place(crp("early", namespace("early")))
	f.schedule("early", 1, []string{"member-1"}, nil)
	w := f.waitWork("member-1", "early", 0)
	if len(w.Manifests) != 3 {
		t.Errorf("work carries %d manifests, want 3", len(w.Manifests))
	}
	if s := f.snapshots("early"); len(s) != 1 || len(s[0].SelectedResources) != 3 {
		t.Errorf("snapshots %+v, want one of 3 objects", s)
	}
}

func TestObjectsAfterANewPlacementMakeANewSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("later"), configMap("later", "a", "x"))
	f.place(crp("later", namespace("later")))
	f.schedule("later", 1, []string{"member-1"}, nil)
	f.hub(configMap("later", "b", "x"))
	var snaps []events.SnapshotCreated
	poll.Until(t, patience, "a snapshot with the later object", func() error {
		snaps = f.snapshots("later")
		if len(snaps) == 0 {
			return errors.New("no snapshot yet")
		}
		if last := snaps[len(snaps)-1]; len(last.SelectedResources) != 3 {
			return fmt.Errorf("latest snapshot %d selects %d objects", last.Index, len(last.SelectedResources))
		}
		return nil
	})
	last := snaps[len(snaps)-1]
	w := f.waitWork("member-1", "later", last.Index)
	if len(w.Manifests) != 3 {
		t.Errorf("work for snapshot %d carries %d manifests, want 3", last.Index, len(w.Manifests))
	}
}

func TestANewPlacementBeforeItsObjectsWaitsForThem(t *testing.T) {
	t.Parallel()
	// A window long enough that every object lands in it.
	f := newFixture(t, rollout.Config{SnapshotWindow: 3 * time.Second})
	f.start()
	reader := `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"waits-reader"},"rules":[]}`
	tests := []struct {
		name    string
		before  []string // published before the placement
		after   []string // after it
		selects []api.ClusterResourceSelector
	}{
		{name: "nothing selected yet", after: []string{namespaceManifest("waits-1"), configMap("waits-1", "a", "x")},
			selects: []api.ClusterResourceSelector{namespace("waits-1")}},
		{name: "one selector of two matches", before: []string{namespaceManifest("waits-2"), configMap("waits-2", "a", "x")},
			after: []string{reader},
			selects: []api.ClusterResourceSelector{namespace("waits-2"),
				{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "waits-reader"}}},
	}
	// One fixture for both (the fixture's helpers fail the test itself, not a subtest).
	for i, tt := range tests {
		name := fmt.Sprintf("waits-%d", i+1)
		f.hub(tt.before...)
		f.place(crp(name, tt.selects...))
		f.hub(tt.after...)
		f.schedule(name, 1, []string{"member-1"}, nil)
		f.waitWork("member-1", name, 0)
		snaps := f.snapshots(name)
		if len(snaps) != 1 || len(snaps[0].SelectedResources) != len(tt.before)+len(tt.after) {
			t.Errorf("%s: snapshots %+v, want one of all %d objects", tt.name, snaps, len(tt.before)+len(tt.after))
		}
	}
}

// rollToCompletion drives a rolling update of snapshot 1 across the
// clusters, reporting each started cluster applied and available, and
// checks that no step starts more than maxUnavailable clusters at once.
func rollToCompletion(t *testing.T, f *fixture, placement string, clusters []string, maxUnavailable int) {
	t.Helper()
	var done []string
	for len(done) < len(clusters) {
		p := f.waitProgress(placement, fmt.Sprintf("more than %v started with index 1", done), func(p revision.Progress) error {
			if p.ResourceIndex != 1 || len(started(p)) <= len(done) {
				return fmt.Errorf("index %d, started %v", p.ResourceIndex, started(p))
			}
			return nil
		})
		var batch []string
		for _, c := range started(p) {
			if !slices.Contains(done, c) {
				batch = append(batch, c)
			}
		}
		if len(batch) > maxUnavailable {
			t.Fatalf("%v started at once, more than maxUnavailable %d", batch, maxUnavailable)
		}
		for _, c := range batch {
			f.report(f.waitWork(c, placement, 1), applied, available)
		}
		done = started(p)
	}
}

func TestRollingUpdateArithmetic(t *testing.T) {
	t.Parallel()
	clusters := []string{"m1", "m2", "m3", "m4"}
	tests := []struct {
		name           string
		maxUnavailable intstr.IntOrString
		replicas       int
		want           int // clusters updated at once
		firstWaits     string
	}{
		{name: "25% of 4 is one at a time, with two replicas", maxUnavailable: intstr.FromString("25%"), replicas: 2, want: 1,
			firstWaits: "waiting for m1 to become available (maxUnavailable 1 of 4 cluster(s))"},
		{name: "100% is all at once", maxUnavailable: intstr.FromString("100%"), replicas: 1, want: 4},
		{name: "an integer", maxUnavailable: intstr.FromInt32(2), replicas: 1, want: 2,
			firstWaits: "waiting for m1, m2 to become available (maxUnavailable 2 of 4 cluster(s))"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, rollout.Config{})
			f.start()
			f.hub(namespaceManifest("shop"), configMap("shop", "settings", "v0"))
			f.place(rolling(crp("shop", namespace("shop")), tt.maxUnavailable, intstr.FromString("25%"), 1))
			f.schedule("shop", 1, clusters, nil)
			// A first rollout goes everywhere at once: nothing was available.
			for _, c := range clusters {
				f.report(f.waitWork(c, "shop", 0), applied, available)
			}
			f.waitReady("shop", clusters...)
			// More replicas share the consumer from here on.
			for range tt.replicas - 1 {
				f.start()
			}

			f.hub(configMap("shop", "settings", "v1"))
			first := f.waitProgress("shop", "index 1 started", func(p revision.Progress) error {
				if p.ResourceIndex != 1 {
					return fmt.Errorf("index %d", p.ResourceIndex)
				}
				return nil
			})
			// The first progress of index 1 is the plan made with the snapshot.
			for _, p := range f.progress("shop") {
				if p.ResourceIndex == 1 {
					first = p
					break
				}
			}
			if got := started(first); !slices.Equal(got, clusters[:tt.want]) {
				t.Errorf("first step started %v, want %v", got, clusters[:tt.want])
			}
			if tt.want < 4 {
				c := clusterOf(first, clusters[tt.want])
				if c.Reason != api.RolloutNotStartedYetReason || c.Message != tt.firstWaits || c.ResourceIndex != 0 {
					t.Errorf("%s: %+v, want RolloutNotStartedYet %q", clusters[tt.want], c, tt.firstWaits)
				}
			}
			rollToCompletion(t, f, "shop", clusters, tt.want)
			// However many replicas, each cluster was sent each index once.
			for _, c := range clusters {
				var indexes []int64
				for _, w := range f.works(c, "shop") {
					indexes = append(indexes, w.ResourceIndex)
				}
				if !slices.Equal(indexes, []int64{0, 1}) {
					t.Errorf("%s was sent indexes %v, want [0 1]", c, indexes)
				}
			}
		})
	}
}

func TestFailedClustersAreUpdatedWithoutWaitingForBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	clusters := []string{"m1", "m2", "m3", "m4"}
	f.hub(namespaceManifest("shop"), configMap("shop", "settings", "v0"))
	f.place(rolling(crp("shop", namespace("shop")), intstr.FromString("25%"), intstr.FromString("25%"), 1))
	f.schedule("shop", 1, clusters, nil)
	for _, c := range clusters {
		w := f.waitWork(c, "shop", 0)
		if c == "m3" {
			f.report(w, applyFail, availUnknown)
		} else {
			f.report(w, applied, available)
		}
	}
	f.waitReady("shop", "m1", "m2", "m4")
	// Wait until m3's failure is recorded before the change.
	poll.Until(t, patience, "m3's report stored", func() error {
		var status string
		err := f.Pool.QueryRow(t.Context(), `select coalesce(report->'applied'->>'status', '') from rollout_clusters
			where placement = 'shop' and cluster = 'm3'`).Scan(&status)
		if err == nil && status != "False" {
			err = fmt.Errorf("m3 applied %q", status)
		}
		return err
	})

	f.hub(configMap("shop", "settings", "v1"))
	f.waitProgress("shop", "index 1", func(p revision.Progress) error {
		if p.ResourceIndex != 1 {
			return fmt.Errorf("index %d", p.ResourceIndex)
		}
		return nil
	})
	var first revision.Progress
	for _, p := range f.progress("shop") {
		if p.ResourceIndex == 1 {
			first = p
			break
		}
	}
	// m3 failed, so it is already unavailable: it is updated at once, and
	// with it unavailable no ready cluster may go down yet.
	if got := started(first); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("first step started %v, want [m3]", got)
	}
	if c := clusterOf(first, "m1"); c.Message != "waiting for m3 to become available (maxUnavailable 1 of 4 cluster(s))" {
		t.Errorf("m1 waits with %q", c.Message)
	}
	f.report(f.waitWork("m3", "shop", 1), applied, available)
	f.waitProgress("shop", "m1 after m3", func(p revision.Progress) error {
		if got := started(p); !slices.Equal(got, []string{"m1", "m3"}) {
			return fmt.Errorf("started %v", got)
		}
		return nil
	})
}

func TestNotTrackableObjectsWaitTheUnavailablePeriod(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	const period = 2
	f.hub(namespaceManifest("jobs"), configMap("jobs", "settings", "v0"))
	f.place(rolling(crp("jobs", namespace("jobs")), intstr.FromInt32(1), intstr.FromInt32(0), period))
	f.schedule("jobs", 1, []string{"m1", "m2"}, nil)
	for _, c := range []string{"m1", "m2"} {
		f.report(f.waitWork(c, "jobs", 0), applied, available)
	}
	f.waitReady("jobs", "m1", "m2")
	f.hub(configMap("jobs", "settings", "v1"))
	w := f.waitWork("m1", "jobs", 1)
	// An apply worker reports the not-trackable object applied, its
	// availability not known.
	f.report(w, applied, notYet, events.ManifestResult{
		Resource:  api.ResourceIdentifier{Group: "example.com", Version: "v1", Kind: "Widget", Name: "w"},
		Applied:   events.Condition{Status: "True", Reason: "Applied"},
		Available: events.Condition{Status: "Unknown", Reason: api.ManifestNotTrackableReason},
	})
	f.waitProgress("jobs", "m2 waits for m1's unavailable period", func(p revision.Progress) error {
		if c := clusterOf(p, "m2"); c.Started || c.Message != "waiting for m1 to become available (maxUnavailable 1 of 2 cluster(s))" {
			return fmt.Errorf("m2 %+v", c)
		}
		var appliedAt *time.Time
		err := f.Pool.QueryRow(t.Context(), `select applied_at from rollout_clusters where placement = 'jobs' and cluster = 'm1'`).Scan(&appliedAt)
		if err == nil && appliedAt == nil {
			err = errors.New("m1's report is not recorded yet")
		}
		return err
	})
	w2 := f.waitWork("m2", "jobs", 1)
	var appliedAt, sentAt time.Time
	if err := f.Pool.QueryRow(t.Context(), `
		select (select applied_at from rollout_clusters where placement = 'jobs' and cluster = 'm1'),
		       (select sent_at from rollout_clusters where placement = 'jobs' and cluster = 'm2')`).Scan(&appliedAt, &sentAt); err != nil {
		t.Fatal(err)
	}
	if gap := sentAt.Sub(appliedAt); gap < period*time.Second {
		t.Errorf("m2 was updated %s after m1 applied, want at least unavailablePeriodSeconds (%ds)", gap, period)
	}
	if w2.UnavailablePeriodSeconds != period {
		t.Errorf("work carries unavailablePeriodSeconds %d, want %d", w2.UnavailablePeriodSeconds, period)
	}
}

func TestTombstonesForUnscheduledClustersAndDeletedPlacements(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("web"))
	// Abandon is for the placement's deletion only (upstream's deleteStrategy): a
	// cluster the scheduler drops loses the objects all the same.
	p := crp("web", namespace("web"))
	p.Spec.Strategy.DeleteStrategy = &api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon}
	f.place(p)
	f.schedule("web", 1, []string{"m1", "m2", "m3"}, nil)
	for _, c := range []string{"m1", "m2", "m3"} {
		f.report(f.waitWork(c, "web", 0), applied, available)
	}

	// The scheduler drops m2.
	f.schedule("web", 1, []string{"m1", "m3"}, map[string]string{"m2": "cluster m2 no longer matches the required affinity"})
	poll.Until(t, patience, "m2's tombstone", func() error {
		ts := f.tombstones("web")
		if len(ts) != 1 {
			return fmt.Errorf("%d tombstones", len(ts))
		}
		if ts[0].Cluster != "m2" || ts[0].Reason != "cluster m2 no longer matches the required affinity" ||
			ts[0].DeleteStrategy.PropagationPolicy != api.DeletePropagationPolicyDelete {
			return fmt.Errorf("tombstone %+v", ts[0])
		}
		return nil
	})

	// m3 leaves the fleet keeping its objects; the scheduler then drops it.
	f.leave("m3", events.LeaveKeep)
	f.schedule("web", 1, []string{"m1"}, map[string]string{"m3": "cluster m3 left the fleet"})
	poll.Until(t, patience, "m3's tombstone", func() error {
		ts := f.tombstones("web")
		if len(ts) != 2 {
			return fmt.Errorf("%d tombstones", len(ts))
		}
		if ts[1].Cluster != "m3" || ts[1].DeleteStrategy.PropagationPolicy != api.DeletePropagationPolicyAbandon {
			return fmt.Errorf("tombstone %+v, want m3's abandoning the objects (leave policy Keep)", ts[1])
		}
		return nil
	})

	// m2 comes back: the same snapshot and generation as before, but new
	// work (a new event id), or the apply worker would keep the tombstone.
	f.schedule("web", 1, []string{"m1", "m2"}, nil)
	poll.Until(t, patience, "m2 sent work again", func() error {
		if n := len(f.works("m2", "web")); n != 2 {
			return fmt.Errorf("m2 was sent work %d times", n)
		}
		return nil
	})

	// Deleting the placement tombstones every cluster holding it, once,
	// with its delete strategy.
	f.deletePlacement("web")
	poll.Until(t, patience, "tombstones of the deleted placement", func() error {
		ts := f.tombstones("web")
		if len(ts) != 4 {
			return fmt.Errorf("%d tombstones", len(ts))
		}
		got := map[string]events.WorkTombstoned{ts[2].Cluster: ts[2], ts[3].Cluster: ts[3]}
		for _, c := range []string{"m1", "m2"} {
			if got[c].Reason != "the placement was deleted" || got[c].DeleteStrategy.PropagationPolicy != api.DeletePropagationPolicyAbandon {
				return fmt.Errorf("tombstone of %s: %+v", c, got[c])
			}
		}
		return nil
	})
	// The scheduler's own removal decision after the delete changes nothing more.
	f.schedule("web", 2, []string{}, map[string]string{"m1": "the placement was deleted", "m2": "the placement was deleted"})
	f.place(crp("other", namespace("web")))
	f.schedule("other", 1, []string{"m1"}, nil)
	f.waitWork("m1", "other", 0) // handled after the decision above
	if n := len(f.tombstones("web")); n != 4 {
		t.Errorf("%d tombstones after the scheduler's removal, want still 4", n)
	}
}

func TestExternalStrategyIsNotRolledOutAutomatically(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("ext"))
	p := crp("ext", namespace("ext"))
	p.Spec.Strategy.Type = api.ExternalRolloutStrategyType
	f.place(p)
	f.schedule("ext", 1, []string{"m1"}, nil)
	f.waitProgress("ext", "External reported", func(pr revision.Progress) error {
		c := clusterOf(pr, "m1")
		if pr.ResourceIndex != 0 || c.Started || c.Reason != api.RolloutNotStartedYetReason ||
			!strings.Contains(c.Message, "the rollout strategy type is External: resources are not rolled out automatically") {
			return fmt.Errorf("m1 %+v", c)
		}
		if len(f.snapshots("ext")) != 1 {
			return errors.New("no snapshot yet")
		}
		return nil
	})
	if n := len(f.works("m1", "ext")); n != 0 {
		t.Errorf("m1 was sent work %d times under External", n)
	}
}

func TestStuckClustersAreReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{StuckAfter: time.Second})
	f.start()
	f.hub(namespaceManifest("stuck"))
	f.place(crp("stuck", namespace("stuck")))
	f.schedule("stuck", 1, []string{"m1", "m2"}, nil)
	w := f.waitWork("m1", "stuck", 0)
	f.report(w, applyFail, availUnknown)
	f.report(f.waitWork("m2", "stuck", 0), applied, available)
	f.waitProgress("stuck", "m1 stuck", func(p revision.Progress) error {
		c := clusterOf(p, "m1")
		if !c.Stuck || !strings.Contains(c.Message, "The rollout on cluster m1 is stuck: not applied and available within 1s: apply failed: Failed to apply 1 of 1 manifest(s)") {
			return fmt.Errorf("m1 %+v", c)
		}
		if clusterOf(p, "m2").Stuck {
			return errors.New("m2 is stuck too")
		}
		return nil
	})
	f.report(w, applied, available)
	f.waitProgress("stuck", "m1 no longer stuck", func(p revision.Progress) error {
		if c := clusterOf(p, "m1"); c.Stuck || c.Message != "Detected the new changes on the resources and started the rollout process" {
			return fmt.Errorf("m1 %+v", c)
		}
		return nil
	})
}

func TestRestartResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{SnapshotWindow: 3 * time.Second})
	stop := f.start()
	f.hub(namespaceManifest("app"), configMap("app", "settings", "v0"))
	f.place(rolling(crp("app", namespace("app")), intstr.FromInt32(1), intstr.FromInt32(0), 1))
	f.schedule("app", 1, []string{"m1", "m2"}, nil)
	for _, c := range []string{"m1", "m2"} {
		f.report(f.waitWork(c, "app", 0), applied, available)
	}
	f.waitReady("app", "m1", "m2")

	// A hub change opens the coalescing window; the service stops before it ends.
	f.hub(configMap("app", "settings", "v1"))
	poll.Until(t, patience, "window open", func() error {
		var due *time.Time
		err := f.Pool.QueryRow(t.Context(), `select snapshot_due_at from rollout_placements where name = 'app'`).Scan(&due)
		if err == nil && due == nil {
			err = errors.New("no window open")
		}
		return err
	})
	stop()

	// Another instance takes the timer over: the snapshot is cut and the
	// rollout starts on m1.
	stop = f.start()
	w := f.waitWork("m1", "app", 1)
	stop()
	f.report(w, applied, available)

	// m1's report waits in the stream while nothing runs; the next instance
	// moves the rollout on to m2.
	f.start()
	f.waitWork("m2", "app", 1)
	for _, c := range []string{"m1", "m2"} {
		var indexes []int64
		for _, w := range f.works(c, "app") {
			indexes = append(indexes, w.ResourceIndex)
		}
		if !slices.Equal(indexes, []int64{0, 1}) {
			t.Errorf("%s was sent indexes %v, want [0 1]", c, indexes)
		}
	}
	if n := len(f.snapshots("app")); n != 2 {
		t.Errorf("%d snapshots, want 2", n)
	}
}

func TestInvalidHubManifestsAreDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	// No name: it cannot be stored. The consumer goes on with the next event.
	subj, _ := events.HubResourceSubject("", "ConfigMap", "app", "nameless")
	f.publish(events.TypeHubResourceUpserted, subj, events.HubResourceUpserted{
		Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"app"}}`)})
	f.hub(namespaceManifest("app"))
	f.place(crp("app", namespace("app")))
	f.schedule("app", 1, []string{"m1"}, nil)
	f.waitWork("m1", "app", 0)
	poll.Until(t, patience, "dead letter", func() error {
		s, err := f.JS.Stream(t.Context(), bus.StreamDeadLetter)
		if err != nil {
			return err
		}
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 1 {
			return fmt.Errorf("%d dead letters", info.State.Msgs)
		}
		return nil
	})
}

func TestARedeliveredEventHasNoSecondEffect(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("web"))
	p := crp("web", namespace("web"))
	p.Spec.Strategy.ApplyStrategy = &api.ApplyStrategy{WhenToTakeOver: api.WhenToTakeOverTypeNever}
	first, err := events.New(events.TypePlacementUpserted, "/flotilla/test", "web", "", events.PlacementUpserted{Placement: p})
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := events.PlacementSubject("web")
	if _, err := f.Publisher.Publish(t.Context(), subj, first); err != nil {
		t.Fatal(err)
	}
	p.Spec.Strategy.ApplyStrategy = &api.ApplyStrategy{WhenToTakeOver: api.WhenToTakeOverTypeIfNoDiff}
	f.place(p)
	f.schedule("web", 2, []string{"m1"}, nil)
	f.waitWork("m1", "web", 0)

	// The first event again, as JetStream redelivers it (same event id, a
	// new stream message): the inbox knows it.
	msg, err := bus.Encode(first, subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.JS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	f.schedule("web", 2, []string{"m1", "m2"}, nil)
	w := f.waitWork("m2", "web", 0)
	if w.Generation != 2 || w.ApplyStrategy.WhenToTakeOver != api.WhenToTakeOverTypeIfNoDiff {
		t.Errorf("after the redelivery m2 got generation %d with whenToTakeOver %s, want 2 and IfNoDiff",
			w.Generation, w.ApplyStrategy.WhenToTakeOver)
	}
	if ws := f.works("m1", "web"); len(ws) != 1 {
		t.Errorf("m1 was sent work %d times, want once", len(ws))
	}
}

// TestHubChangeReselectsOnlyConcernedPlacements: a change to an object in one
// namespace re-selects the placement of that namespace and leaves the
// placement of another namespace alone.
func TestHubChangeReselectsOnlyConcernedPlacements(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("shop"), configMap("shop", "settings", "v0"),
		namespaceManifest("blog"), configMap("blog", "settings", "v0"))
	f.place(crp("shop", namespace("shop")))
	f.place(crp("blog", namespace("blog")))
	for _, p := range []string{"shop", "blog"} {
		poll.Until(t, patience, p+"'s first snapshot", func() error {
			if n := len(f.snapshots(p)); n != 1 {
				return fmt.Errorf("%d snapshots", n)
			}
			return nil
		})
	}
	// blog's row changes whenever the rollout evaluates it.
	blogTouched := func() time.Time {
		t.Helper()
		var at time.Time
		if err := f.Pool.QueryRow(t.Context(), `select updated_at from rollout_placements where name = 'blog'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := blogTouched()
	f.hub(configMap("shop", "settings", "v1"))
	poll.Until(t, patience, "shop's second snapshot", func() error {
		if n := len(f.snapshots("shop")); n != 2 {
			return fmt.Errorf("%d snapshots", n)
		}
		return nil
	})
	// Give a wrongly opened window (50ms) time to fire before looking.
	time.Sleep(300 * time.Millisecond)
	if after := blogTouched(); !after.Equal(before) {
		t.Fatalf("blog was re-evaluated for a change in another namespace (row updated %s, was %s)", after, before)
	}
}
