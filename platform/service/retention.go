package service

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/platform/retention"
)

// Default retentions of the hub services' tables. The inbox outlives the events stream's
// age (an event still in the stream can be delivered again); published outbox rows are
// only kept for inspection.
const (
	DefaultInboxRetention  = 8 * 24 * time.Hour
	DefaultOutboxRetention = 24 * time.Hour
)

// Retention says how long a hub service keeps its inbox and published outbox rows, and
// how often it prunes them (platform/retention). Zero values take the defaults.
type Retention struct {
	Inbox, Outbox time.Duration
	// Every is the time between pruning rounds. Default retention.DefaultEvery.
	Every time.Duration
}

func (r Retention) withDefaults() Retention {
	if r.Inbox == 0 {
		r.Inbox = DefaultInboxRetention
	}
	if r.Outbox == 0 {
		r.Outbox = DefaultOutboxRetention
	}
	if r.Every == 0 {
		r.Every = retention.DefaultEvery
	}
	return r
}

func (r *Retention) register(fs *flag.FlagSet) {
	fs.Var(durationFlag{&r.Inbox}, "inbox-retention", "keep handled event ids this long (e.g. 8d, 200h; default 8d, at least the events stream's age, 7d)")
	fs.Var(durationFlag{&r.Outbox}, "outbox-retention", "keep published outbox rows this long (e.g. 1d, 6h; default 1d)")
	fs.Var(durationFlag{&r.Every}, "prune-interval", "time between pruning rounds of the inbox, outbox and audit log (default 10m)")
}

// validate checks the retentions against the events stream's age.
func (r Retention) validate(topology bus.TopologyOptions) error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"--inbox-retention", r.Inbox}, {"--outbox-retention", r.Outbox}, {"--prune-interval", r.Every}} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative (0 means the default)", f.name, f.d))
		}
	}
	if topology.EventsMaxAge < 0 {
		errs = append(errs, fmt.Errorf("--events-max-age: %s is negative (0 means the default)", topology.EventsMaxAge))
	}
	age := topology.EventsMaxAge
	if age == 0 {
		age = bus.DefaultTopology.EventsMaxAge
	}
	if keep := r.withDefaults().Inbox; keep < age {
		errs = append(errs, fmt.Errorf("--inbox-retention: %s is shorter than the events stream keeps events (%s): an event delivered again after its id was pruned would be handled twice", keep, age))
	}
	return errors.Join(errs...)
}

// Rules are the retention rules of the inbox and the outbox.
func (r Retention) Rules() []retention.Rule {
	r = r.withDefaults()
	return []retention.Rule{inbox.Retention(r.Inbox), outbox.Retention(r.Outbox)}
}

// Retain adds rules to those Run prunes by, the inbox's and the outbox's: a service's
// own tables (the status service's audit log). Call it before Run.
func (e *Env) Retain(rules ...retention.Rule) {
	e.retain = append(e.retain, rules...)
}

// pruner prunes the inbox, the outbox and the tables Retain added.
func (e *Env) pruner() *retention.Pruner {
	r := e.opts.Retention.withDefaults()
	return &retention.Pruner{Pool: e.Pool, Rules: append(r.Rules(), e.retain...), Every: r.Every, Logger: e.Log}
}

// durationFlag is a duration flag that also takes whole days, "8d", as retentions are
// said; it prints as a duration.
type durationFlag struct{ d *time.Duration }

// ParseRetention reads a retention: a Go duration ("36h") or whole days ("90d").
func ParseRetention(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a number of days", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	d, err := ParseRetention(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// RetentionFlag is a flag.Value for a retention (see ParseRetention), for services with
// tables of their own.
func RetentionFlag(d *time.Duration) flag.Value { return durationFlag{d} }
