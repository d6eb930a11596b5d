package sim

import (
	"context"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Each simulated node has the capacity of a common 8-core VM.
const (
	nodeCPUMillis      = 8000
	nodeAllocCPUMillis = 7820
	nodeMemory         = 32 << 30
	nodeAllocMemory    = 29 << 30
)

// nodes is the member's node count: 3 to 50, drawn once for the member.
func (m *member) nodes() int {
	return 3 + int(draw(m.f.opts.Seed, "nodes", m.name)*48)
}

// Properties is the heartbeat member m sends at now: the properties and resource usage the
// real worker computes from Node objects, for the member's nodes, with a share of them
// requested by pods (drawn once for the member, so the properties do not change and the
// scheduler has no reason to reschedule on every beat).
func (m *member) Properties(now time.Time) *events.MemberHeartbeat {
	n := int64(m.nodes())
	used := 0.1 + 0.7*draw(m.f.opts.Seed, "used", m.name)
	cpu := func(millis int64) resource.Quantity { return *resource.NewMilliQuantity(millis, resource.DecimalSI) }
	mem := func(bytes int64) resource.Quantity { return *resource.NewQuantity(bytes, resource.BinarySI) }
	total := api.ResourceList{"cpu": cpu(n * nodeCPUMillis), "memory": mem(n * nodeMemory)}
	alloc := api.ResourceList{"cpu": cpu(n * nodeAllocCPUMillis), "memory": mem(n * nodeAllocMemory)}
	avail := api.ResourceList{
		"cpu":    cpu(int64(float64(n*nodeAllocCPUMillis) * (1 - used))),
		"memory": mem(int64(float64(n*nodeAllocMemory)*(1-used)) &^ (1<<20 - 1)),
	}
	observed := metav1.NewTime(now.UTC())
	prop := func(q resource.Quantity) api.PropertyValue {
		return api.PropertyValue{Value: q.String(), ObservationTime: observed}
	}
	hb := &events.MemberHeartbeat{Name: m.name, Healthy: true, ObservedAt: now.UTC()}
	hb.Properties = map[api.PropertyName]api.PropertyValue{
		api.NodeCountProperty:         {Value: strconv.FormatInt(n, 10), ObservationTime: observed},
		api.TotalCPUProperty:          prop(total["cpu"]),
		api.AllocatableCPUProperty:    prop(alloc["cpu"]),
		api.AvailableCPUProperty:      prop(avail["cpu"]),
		api.TotalMemoryProperty:       prop(total["memory"]),
		api.AllocatableMemoryProperty: prop(alloc["memory"]),
		api.AvailableMemoryProperty:   prop(avail["memory"]),
	}
	hb.ResourceUsage = api.ResourceUsage{Capacity: total, Allocatable: alloc, Available: avail, ObservationTime: observed}
	return hb
}

// heartbeat publishes the member's heartbeat, as the real worker's does.
func (m *member) heartbeat(ctx context.Context) {
	var hb *events.MemberHeartbeat
	switch m.down() {
	case Silent:
		return
	case Unreachable:
		// The real worker's heartbeat when it cannot read Node objects: no properties.
		hb = &events.MemberHeartbeat{Name: m.name, Message: unreachableMessage, ObservedAt: time.Now().UTC()}
	default:
		hb = m.Properties(time.Now())
	}
	ev, err := events.New(events.TypeMemberHeartbeat, m.source, m.beat,
		events.ID(m.name, "heartbeat", hb.ObservedAt.Format(time.RFC3339Nano)), hb)
	if err != nil {
		m.log.Error("cannot publish a heartbeat", "err", err)
		return
	}
	if m.f.publish(ctx, m.beat, ev, m.log) != 0 {
		m.f.stats.heartbeats.Add(1)
	}
}

// armHeartbeat publishes the next heartbeat after the delay, and every period after it.
func (m *member) armHeartbeat(after time.Duration) {
	time.AfterFunc(after, func() {
		ctx := m.f.ctx
		if !m.f.slot(ctx) {
			return
		}
		m.heartbeat(ctx)
		m.f.release()
		m.armHeartbeat(m.f.opts.HeartbeatPeriod)
	})
}
