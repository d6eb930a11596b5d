package scheduler

import (
	"context"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// Scheduler holds the member set in memory; placements and their current
// decisions are read under the placement's row lock, so replicas sharing the
// consumer never decide one placement concurrently.
type Scheduler struct {
	env *service.Env
	now func() time.Time

	mu           sync.Mutex
	members      map[string]*member
	set          *framework.MemberSet // nil when members changed since it was built
	fleetVersion int64                // -1: reload before use
	// reschedule, when set, is the batch's last event that changed the members: every
	// placement is re-decided once at the end of the batch (handle), not once per join,
	// leave or heartbeat that changed them. Guarded by mu, as the batch is.
	reschedule *rescheduling
}

// rescheduling is the event that asked for every placement to be re-decided, and its
// context (its trace).
type rescheduling struct {
	ctx context.Context
	ev  cloudevents.Event
}

func newScheduler(env *service.Env, now func() time.Time) *Scheduler {
	if now == nil {
		now = time.Now
	}
	return &Scheduler{env: env, now: now, members: map[string]*member{}, fleetVersion: -1}
}
