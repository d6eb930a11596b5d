package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/availability"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// decodeWork is the one place the simulator reads a WorkDesired off the bus: the event,
// then, for work whose manifests travel as a blob beside it (ManifestsRef), the manifests,
// fetched and checked as the real worker's resolve fetches them (bus.GetBlob on the
// WORKBLOBS stream, chunks waited for as long), so that a simulated member costs the bus
// what a real one does. An event that does not decode is Permanent (dead-lettered); a
// blob that cannot be fetched now is not, and comes again.
func decodeWork(ctx context.Context, js jetstream.JetStream, ev cloudevents.Event) (*events.WorkDesired, error) {
	work, err := events.DecodeAs[events.WorkDesired](ev)
	if err != nil {
		return nil, bus.Permanent(err)
	}
	if work.ManifestsRef == nil {
		return work, nil
	}
	data, err := bus.GetBlob(ctx, js.Conn(), bus.StreamWorkBlobs, *work.ManifestsRef, blobChunkWait)
	if err != nil {
		return nil, fmt.Errorf("fetch the manifests of %s (%d bytes): %w", work.Placement, work.ManifestsRef.Size, err)
	}
	var manifests []json.RawMessage
	if err := json.Unmarshal(data, &manifests); err != nil {
		return nil, bus.Permanent(fmt.Errorf("decode the manifests of %s: %w", work.Placement, err))
	}
	work.Manifests, work.ManifestsRef = manifests, nil
	return work, nil
}

// blobChunkWait bounds the wait for each chunk of a work blob: the real worker's.
const blobChunkWait = 30 * time.Second

// desired is the latest desired state of a placement: its work or its tombstone.
type desired struct {
	seq  uint64 // stream sequence of the message
	work *events.WorkDesired
	tomb *events.WorkTombstoned
}

// placement is one placement on a simulated member.
type placement struct {
	name string

	// Guarded by member.mu.
	desired  desired
	attempt  int // failed applies of the current desired state
	timer    *time.Timer
	timerAct action
	running  bool
	next     action // due once the running action ends
	held     bool   // work came or was due while the member was down
	holds    bool   // the member holds the objects of an apply that succeeded

	// Touched only by the running action (one at a time per placement).
	work        *events.WorkDesired // what the objects come from
	objects     []*object
	owned       map[manifest.Key]bool // the objects carrying the placement's mark
	availableAt time.Time             // SeparateAvailability: when the objects become available
	published   string                // digest of the last report published
}

// object is one object of a placement as the simulated member holds it.
type object struct {
	obj       manifest.Object
	live      *unstructured.Unstructured // as a ready member would show it; nil unless applied
	appliedAt time.Time
	recheckAt time.Time
	result    events.ManifestResult
}

// Condition statuses.
const (
	statusTrue    = "True"
	statusFalse   = "False"
	statusUnknown = "Unknown"
)

// SimulatedFailure is the error text of a simulated apply failure.
const SimulatedFailure = "simulated failure: the member refused the write"

// The real worker's per-manifest conditions (services/apply/applier/report.go).
var (
	appliedOK  = events.Condition{Status: statusTrue, Reason: applier.AppliedReason, Message: "Manifest has been applied"}
	notApplied = events.Condition{Status: statusUnknown, Reason: api.ManifestNotAvailableYetReason,
		Message: "The manifest has not been applied, so its availability is unknown"}
)

func failure(reason, text string) events.Condition {
	return events.Condition{Status: statusFalse, Reason: reason, Message: api.ManifestApplyFailedMessage(text)}
}

// apply makes the member hold d's objects, failing one of them at FailureRate, and returns
// the report and whether the apply failed in a way the real worker retries. tries counts
// the failed applies of d before this one.
func (p *placement) apply(m *member, d desired, tries int, now time.Time) (*events.WorkReported, bool) {
	w := d.work
	objs := manifest.Parse(w.Manifests)
	gen := []string{p.name, strconv.FormatInt(w.ResourceIndex, 10), strconv.FormatInt(w.Generation, 10), w.ResourceHash}
	attempt := strconv.Itoa(tries)
	fail := m.draw(append([]string{"fail", attempt}, gen...)...) < m.f.opts.FailureRate
	failAt := -1
	if fail && len(objs) > 0 {
		failAt = int(m.draw(append([]string{"which", attempt}, gen...)...) * float64(len(objs)))
	} else {
		fail = false
	}
	if m.f.opts.SeparateAvailability && (p.work == nil || p.work.ResourceIndex != w.ResourceIndex || p.work.Generation != w.Generation) {
		p.availableAt = now.Add(m.f.opts.AvailableDelay.Sample(m.draw(append([]string{"available"}, gen...)...)))
	}
	strategy := applier.StrategyWithDefaults(w.ApplyStrategy)

	prev := map[manifest.Key]*object{}
	for _, o := range p.objects {
		if o.obj.Object != nil && o.obj.Err == nil {
			prev[o.obj.Key()] = o
		}
	}
	want := map[manifest.Key]bool{}
	decoded := true
	next := make([]*object, len(objs))
	for i, o := range objs {
		t := &object{obj: o}
		next[i] = t
		if o.Object == nil || o.Reason == api.ManifestDecodingErredReason {
			decoded = false
		} else {
			want[o.Key()] = true
		}
		old := prev[o.Key()]
		switch {
		case o.Err != nil:
			t.result.Applied, t.result.Available = failure(o.Reason, o.Err.Error()), notApplied
		case i == failAt:
			t.result.Applied, t.result.Available = failure(api.ManifestApplyFailedReason, SimulatedFailure), notApplied
			m.f.stats.failures.Add(1)
		case strategy.Type == api.ApplyStrategyTypeReportDiff:
			// The member holds what the hub holds: no diffs to report.
		default:
			t.result.Applied = appliedOK
			t.live = readyLive(o.Object, m.nodes())
			t.result.ObservedGeneration = t.live.GetGeneration()
			t.appliedAt = now
			if old != nil && old.obj.Hash == o.Hash && !old.appliedAt.IsZero() {
				t.appliedAt = old.appliedAt // the apply changed nothing
			}
			if p.owned == nil {
				p.owned = map[manifest.Key]bool{}
			}
			p.owned[o.Key()] = true
		}
	}
	// Objects the placement no longer lists are removed, unless a manifest could not be
	// decoded (then they cannot be told apart), as the real worker prunes.
	if decoded && strategy.Type != api.ApplyStrategyTypeReportDiff {
		for k := range p.owned {
			if !want[k] {
				delete(p.owned, k)
			}
		}
	}
	p.work, p.objects = w, next
	return p.report(m, now), fail
}

// delete carries out a tombstone: the objects are gone (or abandoned), as the real
// worker's Delete reports it.
func (p *placement) delete(m *member, d desired) *events.WorkReported {
	r := &events.WorkReported{Cluster: m.name, Placement: p.name, Deleted: true}
	if p.work != nil {
		r.ResourceIndex, r.Generation = p.work.ResourceIndex, p.work.Generation
	}
	n := len(p.owned)
	if d.tomb.DeleteStrategy.PropagationPolicy == api.DeletePropagationPolicyAbandon {
		r.Applied = events.Condition{Status: statusTrue, Reason: applier.AbandonedReason,
			Message: fmt.Sprintf("Left %d object(s) on the member without the placement's ownership", n)}
	} else {
		r.Applied = events.Condition{Status: statusTrue, Reason: applier.DeletedReason,
			Message: fmt.Sprintf("Removed %d object(s) the placement owned", n)}
	}
	r.ObservedAt = time.Now().UTC()
	p.work, p.objects, p.owned, p.availableAt = nil, nil, nil, time.Time{}
	return r
}

// report summarises p's objects as the real worker's buildReport does.
func (p *placement) report(m *member, now time.Time) *events.WorkReported {
	w := p.work
	period := time.Duration(w.UnavailablePeriodSeconds) * time.Second
	strategy := applier.StrategyWithDefaults(w.ApplyStrategy)
	r := &events.WorkReported{
		Cluster:       m.name,
		Placement:     w.Placement,
		ResourceIndex: w.ResourceIndex,
		Generation:    w.Generation,
		ObservedAt:    now.UTC(),
		Manifests:     make([]events.ManifestResult, 0, len(p.objects)),
	}
	held := m.f.opts.SeparateAvailability && now.Before(p.availableAt)
	for _, t := range p.objects {
		if strategy.Type != api.ApplyStrategyTypeReportDiff {
			t.refreshAvailability(period, now, held, p.availableAt)
		}
		res := t.result
		res.Resource = t.obj.Resource
		r.Manifests = append(r.Manifests, res)
	}
	applier.Summarize(r, strategy)
	return r
}

// refreshAvailability judges t's availability by the real worker's rules, on the object as
// a ready member shows it; held keeps it unavailable until availableAt.
func (t *object) refreshAvailability(period time.Duration, now time.Time, held bool, availableAt time.Time) {
	t.recheckAt = time.Time{}
	if t.result.Applied.Status != statusTrue || t.live == nil {
		if t.result.Applied.Status != "" {
			t.result.Available = notApplied
		}
		return
	}
	if held {
		t.result.Available = events.Condition{Status: statusFalse, Reason: api.ManifestNotAvailableYetReason,
			Message: "The simulated member makes it available at " + availableAt.UTC().Format(time.RFC3339Nano)}
		t.recheckAt = availableAt
		return
	}
	r := availability.Of(t.live, availability.Tracking{AppliedAt: t.appliedAt, UnavailablePeriod: period, Now: now})
	t.result.Available = events.Condition{Status: r.Status, Reason: r.Reason, Message: r.Message}
	t.recheckAt = r.RecheckAt
}

// recheckAt is when p's report changes with time alone (a not-trackable object counts as
// available, or held availability ends); zero when it will not.
func (p *placement) recheckAt() time.Time {
	var next time.Time
	for _, t := range p.objects {
		if !t.recheckAt.IsZero() && (next.IsZero() || t.recheckAt.Before(next)) {
			next = t.recheckAt
		}
	}
	return next
}

// readyLive is obj as a member where it has been applied and its controllers have done
// their work shows it: workloads with every replica updated and available, Services with
// an address, CRDs established, and generation 1 where the API server keeps one.
func readyLive(obj *unstructured.Unstructured, nodes int) *unstructured.Unstructured {
	u := obj.DeepCopy()
	if hasGeneration(u.GroupVersionKind().GroupKind()) {
		u.SetGeneration(1)
	}
	set := func(v any, fields ...string) { _ = unstructured.SetNestedField(u.Object, v, fields...) }
	replicas := int64(1)
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); found {
		switch n := v.(type) {
		case int64:
			replicas = n
		case float64:
			replicas = int64(n)
		}
	}
	gvk := u.GroupVersionKind()
	switch [2]string{gvk.Group, gvk.Kind} {
	case [2]string{"apps", "Deployment"}:
		set(int64(1), "status", "observedGeneration")
		for _, f := range []string{"replicas", "updatedReplicas", "readyReplicas", "availableReplicas"} {
			set(replicas, "status", f)
		}
	case [2]string{"apps", "StatefulSet"}:
		set(int64(1), "status", "observedGeneration")
		for _, f := range []string{"replicas", "currentReplicas", "updatedReplicas", "readyReplicas", "availableReplicas"} {
			set(replicas, "status", f)
		}
		set(u.GetName()+"-1", "status", "currentRevision")
		set(u.GetName()+"-1", "status", "updateRevision")
	case [2]string{"apps", "DaemonSet"}:
		set(int64(1), "status", "observedGeneration")
		for _, f := range []string{"desiredNumberScheduled", "currentNumberScheduled", "updatedNumberScheduled", "numberReady", "numberAvailable"} {
			set(int64(nodes), "status", f)
		}
	case [2]string{"", "Service"}:
		typ, _, _ := unstructured.NestedString(u.Object, "spec", "type")
		ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
		if ip == "" {
			h := fnv.New32a()
			h.Write([]byte(u.GetNamespace() + "/" + u.GetName()))
			s := h.Sum32()
			ip = fmt.Sprintf("10.96.%d.%d", s>>8&0xff, s&0xff)
			set(ip, "spec", "clusterIP")
			set([]any{ip}, "spec", "clusterIPs")
		}
		if typ == "LoadBalancer" {
			set([]any{map[string]any{"ip": "192.0.2.1"}}, "status", "loadBalancer", "ingress")
		}
	case [2]string{"apiextensions.k8s.io", "CustomResourceDefinition"}:
		set([]any{
			map[string]any{"type": "Established", "status": "True"},
			map[string]any{"type": "NamesAccepted", "status": "True"},
		}, "status", "conditions")
	}
	return u
}

// withoutGeneration are the API groups whose objects the API server keeps no
// metadata.generation for (it stays 0); most others count their spec changes in it.
var withoutGeneration = map[string]bool{
	"": true, "rbac.authorization.k8s.io": true, "storage.k8s.io": true, "scheduling.k8s.io": true,
	"coordination.k8s.io": true, "certificates.k8s.io": true,
}

func hasGeneration(gk schema.GroupKind) bool {
	if gk.Group == "" {
		return gk.Kind == "ReplicationController" || gk.Kind == "Pod"
	}
	return !withoutGeneration[gk.Group]
}
