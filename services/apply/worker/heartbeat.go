package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

var (
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	// namespacesGVR: the heartbeat reports the member's namespaces (at most
	// api.MaxMemberNamespaces, the first by name), for ResourcePlacements.
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// namespaceSettle is how long a heartbeat waits after a namespace came or
// went, for the others of a burst (a placement of many namespaces).
const namespaceSettle = 250 * time.Millisecond

// heartbeats publishes the member's heartbeat now and every HeartbeatPeriod,
// and soon after a namespace is created or deleted on the member, so that a
// ResourcePlacement of that namespace is scheduled at once rather than a
// period later.
//
// A heartbeat for a namespace change takes the namespaces from the watch
// that noticed it and keeps the last period's node and pod properties: a
// placement that creates namespaces would otherwise list every pod of the
// member each time, on the member's API server and here, while its objects
// are being applied.
func (w *Worker) heartbeats(ctx context.Context) {
	namespaces := w.watchNamespaces(ctx)
	t := time.NewTicker(w.cfg.HeartbeatPeriod)
	defer t.Stop()
	var last *events.MemberHeartbeat
	full := true
	for {
		if full || last == nil || !last.Healthy || namespaces == nil || !namespaces.HasSynced() {
			last = Properties(ctx, w.applier.Dynamic(), w.cfg.Cluster, time.Now())
		} else {
			last = withNamespaces(last, namespaces.GetStore().List(), time.Now())
		}
		w.heartbeat(ctx, last)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-w.beatSoon:
			select {
			case <-ctx.Done():
				return
			case <-time.After(namespaceSettle):
			}
			full = false
			t.Reset(w.cfg.HeartbeatPeriod)
		}
	}
}

// watchNamespaces watches the member's namespaces and asks for a heartbeat
// when one is created or deleted (not for those listed at start: the first
// heartbeat has them). It returns the watch, nil if it could not start.
func (w *Worker) watchNamespaces(ctx context.Context) cache.SharedIndexInformer {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(w.applier.Watching(), 0)
	inf := factory.ForResource(namespacesGVR).Informer()
	soon := func() {
		select {
		case w.beatSoon <- struct{}{}:
		default:
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				soon()
			}
		},
		DeleteFunc: func(any) { soon() },
	})
	if err != nil {
		w.log.Warn("namespaces are not watched; heartbeats report them every period only", "err", err)
		return nil
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return inf
}

// withNamespaces is hb observed again at now with the namespaces of objs
// (the watch's), the first api.MaxMemberNamespaces by name as a list gives
// them; the properties keep their own observation times.
func withNamespaces(hb *events.MemberHeartbeat, objs []any, now time.Time) *events.MemberHeartbeat {
	names := make([]string, 0, len(objs))
	owners := make(map[string]string, len(objs))
	for _, o := range objs {
		ns, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		owner := ""
		if tokens := manifest.OwnerTokens(ns.GetLabels()); len(tokens) > 0 {
			owner = tokens[0]
		}
		names = append(names, ns.GetName())
		owners[ns.GetName()] = owner
	}
	slices.Sort(names)
	out := *hb
	out.ObservedAt = now.UTC()
	out.Namespaces = make(map[string]string, min(len(names), api.MaxMemberNamespaces))
	for _, n := range names[:min(len(names), api.MaxMemberNamespaces)] {
		out.Namespaces[n] = owners[n]
	}
	return &out
}

func (w *Worker) heartbeat(ctx context.Context, hb *events.MemberHeartbeat) {
	subject, err := events.HeartbeatSubject(w.cfg.Cluster)
	if err != nil {
		w.log.Error("cannot publish a heartbeat", "err", err)
		return
	}
	ev, err := events.New(events.TypeMemberHeartbeat, w.source, subject,
		events.ID(w.cfg.Cluster, "heartbeat", hb.ObservedAt.Format(time.RFC3339Nano)), hb)
	if err != nil {
		w.log.Error("cannot publish a heartbeat", "err", err)
		return
	}
	if _, err := w.publisher.Publish(ctx, subject, ev); err != nil && ctx.Err() == nil {
		w.log.Warn("heartbeat not published", "err", err)
	}
	if !hb.Healthy {
		w.log.Warn("member is unhealthy", "reason", hb.Message)
		if errors.Is(w.applier.Probe(ctx), applier.ErrUnreachable) {
			w.unreachable()
		}
	}
}

// Properties computes a member's heartbeat from its Node objects: the node
// count, and total, allocatable and available cpu and memory (available is
// allocatable less what the pods bound to the nodes request); and its
// namespaces, each with the placement that created it. A member whose
// API server cannot be read is reported unhealthy, with the reason.
func Properties(ctx context.Context, dyn dynamic.Interface, cluster string, now time.Time) *events.MemberHeartbeat {
	hb := &events.MemberHeartbeat{Name: cluster, ObservedAt: now.UTC()}
	nodes, err := dyn.Resource(nodesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		hb.Message = fmt.Sprintf("the member's API server cannot be read: %v", err)
		return hb
	}
	pods, err := dyn.Resource(podsGVR).List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		hb.Message = fmt.Sprintf("the member's pods cannot be read: %v", err)
		return hb
	}
	namespaces, err := dyn.Resource(namespacesGVR).List(ctx, metav1.ListOptions{Limit: api.MaxMemberNamespaces})
	if err != nil {
		hb.Message = fmt.Sprintf("the member's namespaces cannot be read: %v", err)
		return hb
	}
	hb.Healthy = true
	hb.Namespaces = make(map[string]string, len(namespaces.Items))
	for _, ns := range namespaces.Items {
		owner := ""
		if owners := manifest.OwnerTokens(ns.GetLabels()); len(owners) > 0 {
			owner = owners[0]
		}
		hb.Namespaces[ns.GetName()] = owner
	}

	total, allocatable, requested := sums{}, sums{}, sums{}
	for _, n := range nodes.Items {
		total.addMap(&n, "status", "capacity")
		allocatable.addMap(&n, "status", "allocatable")
	}
	for _, p := range pods.Items {
		if node, _, _ := unstructured.NestedString(p.Object, "spec", "nodeName"); node != "" {
			requested.addPod(&p)
		}
	}
	available := sums{}
	for _, r := range []string{"cpu", "memory"} {
		q := allocatable.get(r)
		q.Sub(requested.get(r))
		if q.Sign() < 0 {
			q = resource.Quantity{}
		}
		available[r] = q
	}

	observed := metav1.NewTime(hb.ObservedAt)
	prop := func(v string) api.PropertyValue { return api.PropertyValue{Value: v, ObservationTime: observed} }
	hb.Properties = map[api.PropertyName]api.PropertyValue{
		api.NodeCountProperty:         prop(strconv.Itoa(len(nodes.Items))),
		api.TotalCPUProperty:          prop(total.str("cpu")),
		api.AllocatableCPUProperty:    prop(allocatable.str("cpu")),
		api.AvailableCPUProperty:      prop(available.str("cpu")),
		api.TotalMemoryProperty:       prop(total.str("memory")),
		api.AllocatableMemoryProperty: prop(allocatable.str("memory")),
		api.AvailableMemoryProperty:   prop(available.str("memory")),
	}
	hb.ResourceUsage = api.ResourceUsage{
		Capacity:        total.list(),
		Allocatable:     allocatable.list(),
		Available:       available.list(),
		ObservationTime: observed,
	}
	return hb
}

// sums adds up cpu and memory quantities.
type sums map[string]resource.Quantity

func (s sums) add(name string, q resource.Quantity) {
	cur := s[name]
	cur.Add(q)
	s[name] = cur
}

func (s sums) get(name string) resource.Quantity {
	q := s[name]
	return q.DeepCopy()
}

func (s sums) str(name string) string {
	q := s.get(name)
	return q.String()
}

func (s sums) list() api.ResourceList {
	return api.ResourceList{"cpu": s.get("cpu"), "memory": s.get("memory")}
}

func (s sums) addMap(u *unstructured.Unstructured, fields ...string) {
	m, _, _ := unstructured.NestedStringMap(u.Object, fields...)
	for _, r := range []string{"cpu", "memory"} {
		if v, ok := m[r]; ok {
			if q, err := resource.ParseQuantity(v); err == nil {
				s.add(r, q)
			}
		}
	}
}

// addPod adds what a pod requests: its containers together, or its largest
// init container if that asks for more.
func (s sums) addPod(p *unstructured.Unstructured) {
	containers := sums{}
	for _, c := range containerRequests(p, "containers") {
		for r, q := range c {
			containers.add(r, q)
		}
	}
	for _, c := range containerRequests(p, "initContainers") {
		for r, q := range c {
			if cur := containers.get(r); q.Cmp(cur) > 0 {
				containers[r] = q
			}
		}
	}
	for r, q := range containers {
		s.add(r, q)
	}
}

func containerRequests(p *unstructured.Unstructured, field string) []sums {
	list, _, _ := unstructured.NestedSlice(p.Object, "spec", field)
	var out []sums
	for _, c := range list {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		req := sums{}
		req.addMap(&unstructured.Unstructured{Object: cm}, "resources", "requests")
		out = append(out, req)
	}
	return out
}
