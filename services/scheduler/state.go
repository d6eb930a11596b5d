package scheduler

import (
	"context"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// Scheduler holds the member set in memory; placements and their current
// decisions are read under the placement's row lock, so replicas sharing the
// consumer never decide one placement concurrently.
type Scheduler struct {
	env *service.Env
	now func() time.Time
	// failoverAfter is the grace period of placements without their own.
	failoverAfter time.Duration

	mu           sync.Mutex
	members      map[string]*member
	set          *framework.MemberSet // nil when members changed since it was built
	fleetVersion int64                // -1: reload before use
	// reschedule, when set, is the batch's last event that changed the members: every
	// placement is re-decided once at the end of the batch (handle), not once per join,
	// leave or heartbeat that changed them. Guarded by mu, as the batch is.
	reschedule *rescheduling
	// heard is the bus time of the newest event the scheduler has taken in: the time
	// up to which it knows the members' heartbeats. It judges silence as of heard, not
	// now, so that its own lag (a backlog, a pause, a restart) never makes a beating
	// member lost; a fleet that falls silent all at once (the hub cut off) loses no
	// member either. Zero until the first batch. Guarded by mu.
	heard time.Time
	// bindings keeps placements' decisions decoded between batches.
	bindings *bindingCache
}

// failoverClock notes the bus time a batch reaches (see Scheduler.heard).
func (s *Scheduler) failoverClock(batch []bus.Delivery) {
	if len(batch) == 0 {
		return
	}
	if t := batch[len(batch)-1].Meta.Time; t.After(s.heard) {
		s.heard = t
	}
}

// rescheduling is the event that asked for every placement to be re-decided, and its
// context (its trace).
type rescheduling struct {
	ctx context.Context
	ev  cloudevents.Event
}

func newScheduler(env *service.Env, now func() time.Time, failoverAfter time.Duration) *Scheduler {
	if now == nil {
		now = time.Now
	}
	if failoverAfter <= 0 {
		failoverAfter = DefaultFailoverAfter
	}
	return &Scheduler{env: env, now: now, failoverAfter: failoverAfter, members: map[string]*member{}, fleetVersion: -1,
		bindings: newBindingCache(defaultBindingCacheBytes)}
}
