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

// statusWriter writes what the status service knows of each placement and member cluster
// into the status subresource of its object on the hub: after each status change event
// (placements) or member event (members), when an object appears or its spec changes, and
// every statusResync for whatever was missed.
type statusWriter struct {
	watch *watcher
	dyn   dynamic.Interface
	q     *query.Client
	nc    *nats.Conn
	log   *slog.Logger
	// owns reports whether hubsync published the placement from the hub's object of that
	// name: only then is the status service's placement that object's.
	owns func(placement string) bool

	mu         sync.Mutex
	dirty      map[schema.GroupVersionResource]map[string]bool
	generation map[string]int64 // last generation seen, by kind/name
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
)

func newStatusWriter(w *watcher, dyn dynamic.Interface, nc *nats.Conn, log *slog.Logger, owns func(string) bool) *statusWriter {
	return &statusWriter{
		watch: w, dyn: dyn, q: query.New(nc), nc: nc, log: log, owns: owns,
		dirty:      map[schema.GroupVersionResource]map[string]bool{},
		generation: map[string]int64{}, written: map[string]written{}, members: map[string]string{},
		wake: make(chan struct{}, 1),
	}
}

func (s *statusWriter) mark(gvr schema.GroupVersionResource, name string) {
	s.mu.Lock()
	if s.dirty[gvr] == nil {
		s.dirty[gvr] = map[string]bool{}
	}
	s.dirty[gvr][name] = true
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
	case crds.Member.GVK:
		gvr = crds.Member.GVR()
	default:
		return
	}
	key := gvk.Kind + "/" + u.GetName()
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
		s.mark(gvr, u.GetName())
	}
}

// run writes statuses until ctx ends.
func (s *statusWriter) run(ctx context.Context) error {
	placementSub, err := s.nc.Subscribe(bus.SubjectsStatus, func(m *nats.Msg) {
		if ev, err := bus.Decode(m); err == nil && ev.Subject() != "" {
			s.mark(crds.Placement.GVR(), ev.Subject())
		}
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
	for _, k := range []crds.Kind{crds.Placement, crds.Member} {
		for _, u := range s.watch.list(k.GVR()) {
			present[k.GVK.Kind+"/"+u.GetName()] = true
			present[k.GVR().Resource+"/"+u.GetName()] = true
			s.mark(k.GVR(), u.GetName())
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
			if gvr == crds.Placement.GVR() {
				err = s.writePlacement(ctx, name)
			} else {
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

func (s *statusWriter) writePlacement(ctx context.Context, name string) error {
	u, ok := s.watch.get(crds.Placement.GVR(), "", name)
	if !ok || u.GetDeletionTimestamp() != nil || !s.owns(name) {
		return nil
	}
	crp, err := s.q.Placement(ctx, name)
	if errors.Is(err, query.ErrNotFound) {
		return nil // not folded yet: its status event will come
	}
	if err != nil {
		return err
	}
	return s.write(ctx, crds.Placement.GVR(), u, HubStatus(crp, u))
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

// write replaces the object's status with status unless it already says that.
func (s *statusWriter) write(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status any) error {
	next, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	ours, current := canonical(next), canonical(u.Object["status"])
	key := gvr.Resource + "/" + u.GetName()
	s.mu.Lock()
	last := s.written[key]
	s.mu.Unlock()
	if ours == current || (ours == last.ours && current == last.stored) {
		return nil
	}
	obj := u.DeepCopy()
	obj.Object["status"] = next
	updated, err := s.dyn.Resource(gvr).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: crds.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s: %w", u.GetName(), err)
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
