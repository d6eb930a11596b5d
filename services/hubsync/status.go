package hubsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// statusWriter writes what the status service knows of each placement and member cluster,
// what the scheduler decided of each eviction, and how each staged update run goes, into
// the status subresource of its object on the hub: after each status change event
// (placements, and the runs of the placement) or member event (members), when an object appears or its spec changes, every evictionPoll while an
// eviction is not decided (no event says it was), and every statusResync for whatever
// was missed.
type statusWriter struct {
	watch *watcher
	dyn   dynamic.Interface
	q     *query.Client
	nc    *nats.Conn
	log   *slog.Logger
	// owns reports whether hubsync published the placement or eviction from the hub's
	// object of that kind, namespace and name: only then is Flotilla's object that object's.
	owns func(gvk schema.GroupVersionKind, namespace, name string) bool

	// dirty, generation and written know an object by its kind and key (objectKey): its
	// name, or namespace..name for a ResourcePlacement, so that ResourcePlacements of one
	// name in two namespaces, or beside a ClusterResourcePlacement of that name, stay apart.
	mu         sync.Mutex
	dirty      map[schema.GroupVersionResource]map[string]bool
	generation map[string]int64 // last generation seen, by kind/key
	written    map[string]written
	// members are the hub's member clusters by their member subject, for member events.
	members map[string]string
	wake    chan struct{}
}

// written is what hubsync last wrote into an object's status and what the API server kept.
type written struct {
	ours, stored string
}

// Pacing of status writes.
const (
	// statusSettle gathers the status events of a burst into one write per object, and
	// gives the status service time to fold a member's event.
	statusSettle = 500 * time.Millisecond
	statusResync = 30 * time.Second
	// evictionPoll asks again for an eviction the scheduler has not decided yet, or a run
	// the rollout has not initialised.
	evictionPoll = time.Second
)

func newStatusWriter(w *watcher, dyn dynamic.Interface, nc *nats.Conn, log *slog.Logger, owns func(gvk schema.GroupVersionKind, namespace, name string) bool) *statusWriter {
	return &statusWriter{
		watch: w, dyn: dyn, q: query.New(nc), nc: nc, log: log, owns: owns,
		dirty:      map[schema.GroupVersionResource]map[string]bool{},
		generation: map[string]int64{}, written: map[string]written{}, members: map[string]string{},
		wake: make(chan struct{}, 1),
	}
}

// objectKey is how the status writer knows a hub object: its name, or for a namespaced
// one (a ResourcePlacement) namespace..name, its placement key.
func objectKey(u *unstructured.Unstructured) string {
	return api.PlacementKey(u.GetNamespace(), u.GetName())
}

// mark asks for the status of the object of gvr with that key (objectKey) to be written.
func (s *statusWriter) mark(gvr schema.GroupVersionResource, key string) {
	s.mu.Lock()
	if s.dirty[gvr] == nil {
		s.dirty[gvr] = map[string]bool{}
	}
	s.dirty[gvr][key] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// seen is the watcher's hook: a placement or member that appears, or whose spec changed
// (its generation), needs its status (re)written; hubsync's own status writes do not.
func (s *statusWriter) seen(gvk schema.GroupVersionKind, u *unstructured.Unstructured) {
	var gvr schema.GroupVersionResource
	switch gvk {
	case crds.Placement.GVK:
		gvr = crds.Placement.GVR()
	case crds.ResourcePlacement.GVK:
		gvr = crds.ResourcePlacement.GVR()
	case crds.Member.GVK:
		gvr = crds.Member.GVR()
	case crds.Eviction.GVK:
		gvr = crds.Eviction.GVR()
	case crds.StagedUpdateRun.GVK:
		gvr = crds.StagedUpdateRun.GVR()
	default:
		return
	}
	key := gvk.Kind + "/" + objectKey(u)
	s.mu.Lock()
	if gvk == crds.Member.GVK {
		if subject, err := events.MemberSubject(u.GetName()); err == nil {
			s.members[subject] = u.GetName()
		}
	}
	last, ok := s.generation[key]
	s.generation[key] = u.GetGeneration()
	s.mu.Unlock()
	if !ok || last != u.GetGeneration() {
		s.mark(gvr, objectKey(u))
	}
}

// run writes statuses until ctx ends.
func (s *statusWriter) run(ctx context.Context) error {
	placementSub, err := s.nc.Subscribe(bus.SubjectsStatus, func(m *nats.Msg) {
		ev, err := bus.Decode(m)
		if err != nil || ev.Subject() == "" {
			return
		}
		// The event names the placement by its key: a ResourcePlacement's is namespace..name.
		if ns, _ := api.SplitPlacementKey(ev.Subject()); ns != "" {
			s.mark(crds.ResourcePlacement.GVR(), ev.Subject())
			return
		}
		s.mark(crds.Placement.GVR(), ev.Subject())
		s.markRuns(ev.Subject())
	})
	if err != nil {
		return fmt.Errorf("follow status events: %w", err)
	}
	defer func() { _ = placementSub.Unsubscribe() }()
	memberSub, err := s.nc.Subscribe(bus.SubjectsMember, func(m *nats.Msg) {
		if name := s.memberOf(m.Subject); name != "" {
			s.mark(crds.Member.GVR(), name)
		}
	})
	if err != nil {
		return fmt.Errorf("follow member events: %w", err)
	}
	defer func() { _ = memberSub.Unsubscribe() }()

	resync := time.NewTicker(statusResync)
	defer resync.Stop()
	s.markAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			s.markAll()
			continue
		case <-s.wake:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(statusSettle):
		}
		s.writeDirty(ctx)
	}
}

// memberOf is the hub's member cluster a member subject (flotilla.member.<name>[.heartbeat])
// is about, "" for none.
func (s *statusWriter) memberOf(subject string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[strings.TrimSuffix(subject, ".heartbeat")]
}

// markAll marks every placement and member of the hub, and forgets what it kept of objects
// the hub no longer has.
func (s *statusWriter) markAll() {
	present := map[string]bool{}
	for _, k := range []crds.Kind{crds.Placement, crds.ResourcePlacement, crds.Member, crds.Eviction, crds.StagedUpdateRun} {
		for _, u := range s.watch.list(k.GVR()) {
			key := objectKey(u)
			present[k.GVK.Kind+"/"+key] = true
			present[k.GVR().Resource+"/"+key] = true
			s.mark(k.GVR(), key)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range s.generation {
		if !present[key] {
			delete(s.generation, key)
		}
	}
	for key := range s.written {
		if !present[key] {
			delete(s.written, key)
		}
	}
	for subject, name := range s.members {
		if !present[crds.Member.GVK.Kind+"/"+name] {
			delete(s.members, subject)
		}
	}
}

func (s *statusWriter) writeDirty(ctx context.Context) {
	s.mu.Lock()
	dirty := s.dirty
	s.dirty = map[schema.GroupVersionResource]map[string]bool{}
	s.mu.Unlock()
	for gvr, names := range dirty {
		for name := range names {
			var err error
			switch gvr {
			case crds.Placement.GVR():
				err = s.writePlacement(ctx, crds.Placement, name)
			case crds.ResourcePlacement.GVR():
				err = s.writePlacement(ctx, crds.ResourcePlacement, name)
			case crds.Eviction.GVR():
				err = s.writeEviction(ctx, name)
			case crds.StagedUpdateRun.GVR():
				err = s.writeRun(ctx, name)
			default:
				err = s.writeMember(ctx, name)
			}
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, query.ErrNoStatusService):
				// Nothing answers: the next resync tries everything again.
				s.log.Warn("cannot write statuses on the hub until the status service answers", "error", err)
				return
			case err != nil:
				s.log.Warn("write status on the hub; retrying", "resource", gvr.Resource, "name", name, "error", err)
				time.AfterFunc(time.Second, func() { s.mark(gvr, name) })
			}
		}
	}
}

// writePlacement writes the status of the placement of kind k (a ClusterResourcePlacement
// or a ResourcePlacement) whose placement key is key. The status service reports a
// ResourcePlacement as the user wrote it: with its ResourcePlacement condition names.
func (s *statusWriter) writePlacement(ctx context.Context, k crds.Kind, key string) error {
	namespace, name := api.SplitPlacementKey(key)
	if (namespace != "") != k.Namespaced {
		return nil // a key of the other kind: never this kind's object
	}
	u, ok := s.watch.get(k.GVR(), namespace, name)
	if !ok || u.GetDeletionTimestamp() != nil || !s.owns(k.GVK, namespace, name) {
		return nil
	}
	crp, err := s.q.Placement(ctx, key)
	if errors.Is(err, query.ErrNotFound) {
		return nil // not folded yet: its status event will come
	}
	if err != nil {
		return err
	}
	return s.write(ctx, k.GVR(), u, HubStatus(crp, u))
}

func (s *statusWriter) writeMember(ctx context.Context, name string) error {
	u, ok := s.watch.get(crds.Member.GVR(), "", name)
	if !ok || u.GetDeletionTimestamp() != nil {
		return nil
	}
	m, err := s.q.Member(ctx, name)
	if errors.Is(err, query.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st := m.Status
	for i := range st.Conditions {
		if st.Conditions[i].ObservedGeneration > 0 {
			st.Conditions[i].ObservedGeneration = u.GetGeneration()
		}
	}
	return s.write(ctx, crds.Member.GVR(), u, &st)
}

// writeEviction writes the scheduler's verdict on an eviction, and asks again in a while
// while there is none: the scheduler announces no verdict, and an eviction that waits for
// its placement or budget is decided later.
func (s *statusWriter) writeEviction(ctx context.Context, name string) error {
	u, ok := s.watch.get(crds.Eviction.GVR(), "", name)
	if !ok || u.GetDeletionTimestamp() != nil || !s.owns(crds.Eviction.GVK, "", name) {
		return nil
	}
	e, err := s.q.Eviction(ctx, name)
	if err != nil && !errors.Is(err, query.ErrNotFound) {
		return err
	}
	if err != nil || !evictionDecided(e.Status.Conditions) {
		time.AfterFunc(evictionPoll, func() { s.mark(crds.Eviction.GVR(), name) })
	}
	if err != nil {
		return nil // not handled yet
	}
	st := e.Status
	for i := range st.Conditions {
		st.Conditions[i].ObservedGeneration = u.GetGeneration()
	}
	return s.write(ctx, crds.Eviction.GVR(), u, &st)
}

// markRuns marks the hub's runs of a placement: a run's progress shows in its placement's
// status, whose events say when to look.
func (s *statusWriter) markRuns(placement string) {
	for _, u := range s.watch.list(crds.StagedUpdateRun.GVR()) {
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "placementName"); name == placement {
			s.mark(crds.StagedUpdateRun.GVR(), u.GetName())
		}
	}
}

// writeRun writes the rollout's status of a staged update run.
func (s *statusWriter) writeRun(ctx context.Context, name string) error {
	u, ok := s.watch.get(crds.StagedUpdateRun.GVR(), "", name)
	if !ok || u.GetDeletionTimestamp() != nil || !s.owns(crds.StagedUpdateRun.GVK, "", name) {
		return nil
	}
	run, err := s.q.StagedUpdateRun(ctx, name)
	if errors.Is(err, query.ErrNotFound) {
		time.AfterFunc(evictionPoll, func() { s.mark(crds.StagedUpdateRun.GVR(), name) })
		return nil // not taken in yet
	}
	if err != nil {
		return err
	}
	st := run.Status
	if meta.FindStatusCondition(st.Conditions, api.UpdateRunConditionInitialized) == nil {
		// Not initialised yet, and a run that fails to initialise changes no placement's status.
		time.AfterFunc(evictionPoll, func() { s.mark(crds.StagedUpdateRun.GVR(), name) })
	}
	for i := range st.Conditions {
		if st.Conditions[i].ObservedGeneration > 0 {
			st.Conditions[i].ObservedGeneration = u.GetGeneration()
		}
	}
	err = s.write(ctx, crds.StagedUpdateRun.GVR(), u, &st)
	if apierrors.IsRequestEntityTooLargeError(err) {
		// A run of thousands of clusters outgrows what the hub keeps in one object:
		// fleetctl get csur shows it; retrying would not help.
		s.log.Warn("the run's status is too large for the hub; see fleetctl get csur", "run", name, "error", err)
		return nil
	}
	return err
}

// evictionDecided reports whether the scheduler is done with an eviction: found invalid,
// or executed or not (an eviction runs once).
func evictionDecided(cs []metav1.Condition) bool {
	return meta.IsStatusConditionFalse(cs, api.EvictionConditionValid) || meta.FindStatusCondition(cs, api.EvictionConditionExecuted) != nil
}

// write replaces the object's status with status unless it already says that.
func (s *statusWriter) write(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status any) error {
	next, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	ours, current := canonical(next), canonical(u.Object["status"])
	key := gvr.Resource + "/" + objectKey(u)
	s.mu.Lock()
	last := s.written[key]
	s.mu.Unlock()
	if ours == current || (ours == last.ours && current == last.stored) {
		return nil
	}
	obj := u.DeepCopy()
	obj.Object["status"] = next
	updated, err := s.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: crds.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s: %w", objectKey(u), err)
	}
	s.mu.Lock()
	s.written[key] = written{ours: ours, stored: canonical(updated.Object["status"])}
	s.mu.Unlock()
	return nil
}

// canonical is v as JSON with sorted keys, for comparisons.
func canonical(v any) string {
	if v == nil {
		return "{}"
	}
	data, err := json.Marshal(v)
	if err != nil || bytes.Equal(data, []byte("null")) {
		return "{}"
	}
	return string(data)
}

// HubStatus is the status the status service reports for a placement, as the hub's object
// of it shows it: each condition's observedGeneration counts the hub object's generations,
// not Flotilla's (which keep counting across a re-creation). When the placement the status
// service holds has the hub object's spec, its generation is the hub object's; an older
// one is as many generations back. When the status service has not caught up with the
// hub's spec yet, every condition is older than the hub's generation.
func HubStatus(crp *api.ClusterResourcePlacement, hub *unstructured.Unstructured) *api.PlacementStatus {
	st := copyStatus(crp.Status)
	hubGen := hub.GetGeneration()
	base := hubGen
	if !sameSpec(crp, hub) {
		base = hubGen - 1
	}
	remap := func(cs []metav1.Condition) {
		for i := range cs {
			if cs[i].ObservedGeneration <= 0 {
				continue
			}
			cs[i].ObservedGeneration = max(0, base-(crp.Generation-cs[i].ObservedGeneration))
		}
	}
	remap(st.Conditions)
	for i := range st.PlacementStatuses {
		remap(st.PlacementStatuses[i].Conditions)
	}
	return st
}

// sameSpec reports whether the hub object, read as hubsync publishes it, has the spec of the
// placement the status service holds.
func sameSpec(crp *api.ClusterResourcePlacement, hub *unstructured.Unstructured) bool {
	obj, err := decodeFleetObject(hub.DeepCopy())
	if err != nil {
		return false
	}
	hubCRP, ok := obj.(*api.ClusterResourcePlacement)
	if !ok {
		return false
	}
	api.SetDefaults(hubCRP)
	a, err1 := json.Marshal(hubCRP.Spec)
	b, err2 := json.Marshal(crp.Spec)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// copyStatus is a deep copy of st (the api types have no DeepCopy).
func copyStatus(st api.PlacementStatus) *api.PlacementStatus {
	var out api.PlacementStatus
	data, err := json.Marshal(st)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		return &st // cannot happen: the type round-trips
	}
	return &out
}
