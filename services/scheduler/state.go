package scheduler

import (
	"sync"
	"time"

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
}

func newScheduler(env *service.Env, now func() time.Time) *Scheduler {
	if now == nil {
		now = time.Now
	}
	return &Scheduler{env: env, now: now, members: map[string]*member{}, fleetVersion: -1}
}
