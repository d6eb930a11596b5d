package scheduler

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/platform/retention"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Default retentions of the scheduler's history tables.
const (
	// DefaultEvictionRetention keeps a decided eviction (fleetctl get crpe shows its
	// verdict) and a deleted eviction's or budget's row this long.
	DefaultEvictionRetention = 30 * 24 * time.Hour
	// DefaultFailoverRetention keeps failover_history rows as long as the audit log.
	DefaultFailoverRetention = 90 * 24 * time.Hour
)

// Retention is how long the scheduler keeps what it is done with. Zero values take the
// defaults.
type Retention struct {
	// Evictions: the rows of disruptions that are done with, from when the scheduler last
	// wrote them: every eviction (each runs once, when it is created, and keeps its
	// verdict) and every deleted eviction or budget. Budgets in force stay.
	Evictions time.Duration
	// Failover: failover_history rows, from when they happened.
	Failover time.Duration
}

func (r *Retention) register(fs *flag.FlagSet) {
	fs.Var(service.RetentionFlag(&r.Evictions), "eviction-retention",
		"keep evictions (with their verdicts) and deleted disruption budgets this long after the scheduler last wrote them (e.g. 30d, 720h; default 30d, at least --inbox-retention)")
	fs.Var(service.RetentionFlag(&r.Failover), "failover-retention",
		"keep failover_history rows this long (e.g. 90d; default 90d, at least --inbox-retention)")
}

// validate checks the retentions: a row outlives the ids of the events about it (an
// eviction's row is what keeps a re-sent eviction from running twice, a deleted object's
// what keeps a late event from bringing it back).
func (r Retention) validate(inbox time.Duration) error {
	if inbox == 0 {
		inbox = service.DefaultInboxRetention
	}
	var errs []error
	for _, f := range []struct {
		name     string
		set, use time.Duration
	}{{"--eviction-retention", r.Evictions, r.withDefaults().Evictions}, {"--failover-retention", r.Failover, r.withDefaults().Failover}} {
		switch {
		case f.set < 0:
			errs = append(errs, fmt.Errorf("%s: %s is negative (0 means the default)", f.name, f.set))
		case f.use < inbox:
			errs = append(errs, fmt.Errorf("%s: %s is shorter than --inbox-retention (%s): the scheduler's rows outlive the events about them", f.name, f.use, inbox))
		}
	}
	return errors.Join(errs...)
}

func (r Retention) withDefaults() Retention {
	if r.Evictions == 0 {
		r.Evictions = DefaultEvictionRetention
	}
	if r.Failover == 0 {
		r.Failover = DefaultFailoverRetention
	}
	return r
}

// rules are the retention rules of disruptions and failover_history.
func (r Retention) rules() []retention.Rule {
	r = r.withDefaults()
	return []retention.Rule{
		{Table: "disruptions", Column: "updated_at", Keep: r.Evictions,
			Where: fmt.Sprintf("deleted or kind = '%s'", api.ClusterResourcePlacementEvictionKind)},
		{Table: "failover_history", Column: "at", Keep: r.Failover},
	}
}
