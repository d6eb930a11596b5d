package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

func TestDelayParsesAndSamples(t *testing.T) {
	for _, tc := range []struct {
		in       string
		lo, hi   time.Duration // of samples at u = 0 and u → 1
		wantText string
	}{
		{"200ms", 200 * time.Millisecond, 200 * time.Millisecond, "200ms"},
		{"50ms-500ms", 50 * time.Millisecond, 500 * time.Millisecond, "50ms-500ms"},
		{"exp:100ms", 0, time.Second, "exp:100ms"},
		{"0s", 0, 0, "0s"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d Delay
			if err := d.Set(tc.in); err != nil {
				t.Fatal(err)
			}
			if got := d.String(); got != tc.wantText {
				t.Errorf("String() = %q, want %q", got, tc.wantText)
			}
			if got := d.Sample(0); got != tc.lo {
				t.Errorf("Sample(0) = %s, want %s", got, tc.lo)
			}
			if got := d.Sample(0.999999999); got < tc.lo || got > tc.hi {
				t.Errorf("Sample(~1) = %s, want within [%s, %s]", got, tc.lo, tc.hi)
			}
		})
	}
	for _, bad := range []string{"", "soon", "500ms-50ms", "-1s", "exp:x"} {
		var d Delay
		if err := d.Set(bad); err == nil {
			t.Errorf("Set(%q) = nil, want an error", bad)
		}
	}
}

func TestDrawsAreDeterministicAndUniform(t *testing.T) {
	if draw(1, "a", "b") != draw(1, "a", "b") {
		t.Fatal("the same seed and parts drew differently")
	}
	if draw(1, "a", "b") == draw(2, "a", "b") || draw(1, "ab") == draw(1, "a", "b") {
		t.Error("different seeds or parts drew the same")
	}
	const n = 20000
	var buckets [10]int
	for i := range n {
		u := draw(7, "x", fmt.Sprint(i))
		if u < 0 || u >= 1 {
			t.Fatalf("draw %g is not in [0, 1)", u)
		}
		buckets[int(u*10)]++
	}
	for i, c := range buckets {
		if c < n/10*8/10 || c > n/10*12/10 {
			t.Errorf("bucket %d holds %d of %d draws: not uniform", i, c, n)
		}
	}
}

func TestSpreadCoversRegionsZonesAndEnvironments(t *testing.T) {
	zones, envs := map[string]int{}, map[string]int{}
	const n = 1800
	for i := range n {
		l := DefaultSpread.Labels(i)
		if l[SimulatedLabel] != "true" || l[RegionLabel] == "" || !strings.HasPrefix(l[ZoneLabel], l[RegionLabel]+"-") {
			t.Fatalf("member %d: labels %v", i, l)
		}
		zones[l[ZoneLabel]]++
		envs[l[EnvironmentLabel]]++
	}
	if len(zones) != 18 {
		t.Errorf("%d zones, want 6 regions × 3", len(zones))
	}
	for z, c := range zones {
		if c != n/18 {
			t.Errorf("zone %s has %d members, want %d (an even spread)", z, c, n/18)
		}
	}
	if p := float64(envs["production"]) / n; p < 0.55 || p > 0.65 {
		t.Errorf("%.0f%% production, want about 60%% (%v)", p*100, envs)
	}
}

// bus is an embedded NATS server with the topology, and what was reported on it.
type testBus struct {
	js jetstream.JetStream
	nc *nats.Conn

	mu      sync.Mutex
	reports map[string][]events.WorkReported // by cluster/placement, oldest first
	beats   map[string]int                   // heartbeats by member
	sick    map[string][]string              // the messages of unhealthy heartbeats, by member
	joined  map[string]api.MemberCluster
}

func newTestBus(t *testing.T) *testBus {
	t.Helper()
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &testBus{js: js, nc: nc, reports: map[string][]events.WorkReported{}, beats: map[string]int{}, sick: map[string][]string{}, joined: map[string]api.MemberCluster{}}
	sub, err := nc.Subscribe("flotilla.>", func(msg *nats.Msg) {
		if strings.HasPrefix(msg.Subject, "flotilla.blob.") {
			return // chunks of a blob, not events
		}
		ev, err := bus.Decode(msg)
		if err != nil {
			t.Errorf("decode %s: %v", msg.Subject, err)
			return
		}
		p, err := events.Decode(ev)
		if err != nil {
			t.Errorf("decode %s: %v", msg.Subject, err)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		switch p := p.(type) {
		case *events.WorkReported:
			want, _ := events.WorkStatusSubject(p.Cluster, p.Placement)
			if msg.Subject != want || ev.Source() != "flotilla/apply/"+p.Cluster {
				t.Errorf("report of %s/%s on %s from %s", p.Cluster, p.Placement, msg.Subject, ev.Source())
			}
			b.reports[p.Cluster+"/"+p.Placement] = append(b.reports[p.Cluster+"/"+p.Placement], *p)
		case *events.MemberHeartbeat:
			b.beats[p.Name]++
			if !p.Healthy {
				b.sick[p.Name] = append(b.sick[p.Name], p.Message)
			}
		case *events.MemberJoined:
			b.joined[p.Member.Name] = p.Member
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return b
}

// run runs a fleet on the bus until the test ends.
func (b *testBus) run(t *testing.T, opts Options) *Fleet {
	t.Helper()
	opts.JetStream = b.js
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	})
	select {
	case <-f.Joined():
	case err := <-done:
		t.Fatalf("fleet stopped while joining: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("members did not join within a minute")
	}
	return f
}

// publishWork publishes desired state as the rollout does, on the WORK stream.
func (b *testBus) publishWork(t *testing.T, typ string, payload any, cluster, placement string) {
	t.Helper()
	subject, err := events.WorkSubject(cluster, placement)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.New(typ, "/flotilla/test", subject, "", payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(b.js).Publish(t.Context(), subject, ev); err != nil {
		t.Fatal(err)
	}
}

// last returns the last report of cluster/placement that satisfies ok.
func (b *testBus) waitReport(t *testing.T, key, what string, ok func(events.WorkReported) error) events.WorkReported {
	t.Helper()
	var got events.WorkReported
	poll.Until(t, 30*time.Second, key+": "+what, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		rs := b.reports[key]
		if len(rs) == 0 {
			return errors.New("no report yet")
		}
		got = rs[len(rs)-1]
		return ok(got)
	})
	return got
}

func manifests(t *testing.T, docs ...string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, d := range docs {
		if !json.Valid([]byte(d)) {
			t.Fatalf("not JSON: %s", d)
		}
		out = append(out, json.RawMessage(d))
	}
	return out
}

var (
	namespaceJSON  = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app"}}`
	configMapJSON  = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"app"},"data":{"k":"v"}}`
	deploymentJSON = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"app"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`
	jobJSON        = `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"once","namespace":"app"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}`
)

// A member joins with its labels and beats; it applies its work and answers a tombstone,
// in both consumer modes; work for clusters outside the fleet is left alone.
func TestMembersJoinApplyAndDelete(t *testing.T) {
	for _, mode := range []ConsumerMode{PerMember, Shared} {
		t.Run(mode.String(), func(t *testing.T) {
			b := newTestBus(t)
			f := b.run(t, Options{Members: 2, Consumers: mode, HeartbeatPeriod: time.Second})
			if got := f.Names(); len(got) != 2 || got[0] != "sim-1" || got[1] != "sim-2" {
				t.Fatalf("names %v, want sim-1 and sim-2", got)
			}
			poll.Until(t, 30*time.Second, "members joined with their labels, beating", func() error {
				b.mu.Lock()
				defer b.mu.Unlock()
				for i, name := range f.Names() {
					mc, ok := b.joined[name]
					if !ok || mc.Labels[RegionLabel] != DefaultSpread.Labels(i)[RegionLabel] || mc.Spec.HeartbeatPeriodSeconds != 1 {
						return fmt.Errorf("%s joined as %+v", name, mc)
					}
					if b.beats[name] < 2 {
						return fmt.Errorf("%s beat %d times", name, b.beats[name])
					}
				}
				return nil
			})

			work := events.WorkDesired{Cluster: "sim-2", Placement: "app", ResourceIndex: 3, Generation: 2, ResourceHash: "h",
				Manifests: manifests(t, namespaceJSON, configMapJSON, deploymentJSON)}
			b.publishWork(t, events.TypeWorkDesired, work, "sim-2", "app")
			other := work
			other.Cluster = "real-1" // not in the fleet: nobody here answers
			b.publishWork(t, events.TypeWorkDesired, other, "real-1", "app")

			r := b.waitReport(t, "sim-2/app", "applied and available", func(r events.WorkReported) error {
				if r.Applied.Status != "True" || r.Available.Status != "True" {
					return fmt.Errorf("applied %+v, available %+v", r.Applied, r.Available)
				}
				return nil
			})
			if r.ResourceIndex != 3 || r.Generation != 2 || len(r.Manifests) != 3 ||
				r.Applied.Message != "Successfully applied 3 manifest(s)" || r.Available.Message != "All 3 manifest(s) are available" {
				t.Errorf("report %+v", r)
			}
			if m := r.Manifests[2]; m.Resource.Kind != "Deployment" || m.Resource.Namespace != "app" || m.Resource.Group != "apps" ||
				m.Available.Message != "Deployment has all 3 replicas updated and available" {
				t.Errorf("deployment result %+v", m)
			}

			b.publishWork(t, events.TypeWorkTombstoned, events.WorkTombstoned{Cluster: "sim-2", Placement: "app", Reason: "deleted"}, "sim-2", "app")
			r = b.waitReport(t, "sim-2/app", "deleted", func(r events.WorkReported) error {
				if !r.Deleted {
					return errors.New("not deleted yet")
				}
				return nil
			})
			if r.Applied.Reason != "Deleted" || r.Applied.Message != "Removed 3 object(s) the placement owned" || r.ResourceIndex != 3 {
				t.Errorf("tombstone report %+v", r)
			}
			// A report is counted once its publish is acknowledged, which may be
			// after the test saw it on the bus.
			poll.Until(t, 30*time.Second, "the fleet's stats", func() error {
				if st := f.Stats(); st.Work != 1 || st.Tombstones != 1 || st.Reports != 2 {
					return fmt.Errorf("stats %+v, want 1 desired state, 1 tombstone, 2 reports", st)
				}
				return nil
			})
			b.mu.Lock()
			defer b.mu.Unlock()
			if n := len(b.reports["real-1/app"]); n != 0 {
				t.Errorf("%d reports for a cluster outside the fleet", n)
			}
		})
	}
}

// Failures follow the seed, are reported as the real worker reports them and retried until
// an attempt succeeds; availability can come in a report of its own; a not-trackable object
// counts as available after the unavailable period, as the real worker reports it.
func TestFailuresAvailabilityAndNotTrackable(t *testing.T) {
	b := newTestBus(t)
	// Seed 6 fails the first attempt of sim-1's work and not the second (see below).
	f := b.run(t, Options{Members: 1, FailureRate: 0.5, Seed: 6, RetryBase: 10 * time.Millisecond,
		SeparateAvailability: true, AvailableDelay: Fixed(300 * time.Millisecond)})
	work := events.WorkDesired{Cluster: "sim-1", Placement: "p", ResourceIndex: 1, Generation: 1, ResourceHash: "h1",
		Manifests: manifests(t, namespaceJSON, configMapJSON, jobJSON), UnavailablePeriodSeconds: 1}
	gen := []string{"p", "1", "1", "h1"}
	if draw(6, append([]string{"sim-1", "fail", "0"}, gen...)...) >= 0.5 || draw(6, append([]string{"sim-1", "fail", "1"}, gen...)...) < 0.5 {
		t.Fatal("seed 6 no longer fails the first attempt only: pick another")
	}
	b.publishWork(t, events.TypeWorkDesired, work, "sim-1", "p")

	final := b.waitReport(t, "sim-1/p", "available in the end", func(r events.WorkReported) error {
		if r.Available.Status != "True" {
			return fmt.Errorf("available %+v", r.Available)
		}
		return nil
	})
	b.mu.Lock()
	reports := append([]events.WorkReported(nil), b.reports["sim-1/p"]...)
	b.mu.Unlock()
	if len(reports) < 3 {
		t.Fatalf("%d reports, want a failure, an applied one and an available one", len(reports))
	}
	failed, applied := reports[0], reports[1]
	if failed.Applied.Reason != api.ApplyFailedReason || failed.Available.Reason != api.AvailableUnknownReason ||
		!strings.Contains(failed.Applied.Message, "Failed to apply 1 of 3 manifest(s)") {
		t.Errorf("first report %+v, want one failed manifest", failed)
	}
	var failedManifests int
	for _, m := range failed.Manifests {
		if m.Applied.Status == "False" {
			failedManifests++
			if m.Applied.Reason != api.ManifestApplyFailedReason || !strings.Contains(m.Applied.Message, SimulatedFailure) {
				t.Errorf("failed manifest %+v", m)
			}
		}
	}
	if failedManifests != 1 {
		t.Errorf("%d failed manifests, want 1", failedManifests)
	}
	if applied.Applied.Status != "True" || applied.Available.Reason != api.NotAvailableYetReason {
		t.Errorf("second report %+v, want applied and not available yet", applied)
	}
	if job := final.Manifests[2]; job.Available.Reason != api.ManifestNotTrackableReason || job.Available.Status != "True" {
		t.Errorf("job %+v, want available as not trackable", job)
	}
	if st := f.Stats(); st.Failures != 1 {
		t.Errorf("%d simulated failures, want 1", st.Failures)
	}
}

// Work whose manifests travel as a blob beside the event is applied with the blob's
// manifests, as the real worker applies it.
func TestWorkWithManifestsInABlob(t *testing.T) {
	b := newTestBus(t)
	b.run(t, Options{Members: 1})
	prefix, err := bus.WorkBlobPrefix("sim-1", "big")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(manifests(t, namespaceJSON, configMapJSON, deploymentJSON))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := bus.PutBlob(t.Context(), b.js, bus.StreamWorkBlobs, prefix, data)
	if err != nil {
		t.Fatal(err)
	}
	b.publishWork(t, events.TypeWorkDesired, events.WorkDesired{Cluster: "sim-1", Placement: "big", ResourceHash: "h", ManifestsRef: &ref}, "sim-1", "big")
	r := b.waitReport(t, "sim-1/big", "applied", func(r events.WorkReported) error {
		if r.Applied.Status != "True" {
			return fmt.Errorf("applied %+v", r.Applied)
		}
		return nil
	})
	if len(r.Manifests) != 3 || r.Manifests[1].Resource.Kind != "ConfigMap" {
		t.Errorf("report %+v, want the blob's 3 manifests", r)
	}
}
