package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// placementConditions are the placement-level condition types wait knows,
// by their short names.
var placementConditions = []api.ClusterResourcePlacementConditionType{
	api.ClusterResourcePlacementScheduledConditionType,
	api.ClusterResourcePlacementRolloutStartedConditionType,
	api.ClusterResourcePlacementOverriddenConditionType,
	api.ClusterResourcePlacementWorkSynchronizedConditionType,
	api.ClusterResourcePlacementAppliedConditionType,
	api.ClusterResourcePlacementAvailableConditionType,
	api.ClusterResourcePlacementDiffReportedConditionType,
	api.ClusterResourcePlacementSynchronizedConditionType,
}

const conditionPrefix = "ClusterResourcePlacement"

// waitFor is a parsed --for.
type waitFor struct {
	// deleted waits for the placement to be gone.
	deleted bool
	// condition and status: the condition type and the wanted status.
	condition string
	status    metav1.ConditionStatus
}

func (f waitFor) String() string {
	if f.deleted {
		return "deletion"
	}
	return fmt.Sprintf("condition %s=%s", f.condition, f.status)
}

// parseWaitFor reads kubectl's --for syntax: delete, or
// condition=NAME[=VALUE] where NAME is a condition type or its short name
// (Applied for ClusterResourcePlacementApplied) and VALUE defaults to True.
func parseWaitFor(s string) (waitFor, error) {
	if strings.EqualFold(s, "delete") {
		return waitFor{deleted: true}, nil
	}
	rest, ok := strings.CutPrefix(s, "condition=")
	if !ok || rest == "" {
		return waitFor{}, fmt.Errorf("--for must be delete or condition=NAME[=VALUE] (e.g. condition=Applied), not %q", s)
	}
	name, value, hasValue := strings.Cut(rest, "=")
	f := waitFor{status: metav1.ConditionTrue}
	if hasValue {
		switch strings.ToLower(value) {
		case "true":
		case "false":
			f.status = metav1.ConditionFalse
		case "unknown":
			f.status = metav1.ConditionUnknown
		default:
			return waitFor{}, fmt.Errorf("the condition value in --for must be True, False or Unknown, not %q", value)
		}
	}
	for _, t := range placementConditions {
		if strings.EqualFold(name, string(t)) || strings.EqualFold(conditionPrefix+name, string(t)) ||
			strings.EqualFold(name, api.ResourcePlacementConditionType(string(t))) {
			f.condition = string(t)
			return f, nil
		}
	}
	short := make([]string, 0, len(placementConditions))
	for _, t := range placementConditions {
		short = append(short, strings.TrimPrefix(string(t), conditionPrefix))
	}
	return waitFor{}, fmt.Errorf("unknown condition %q in --for; use one of %s (or the full ClusterResourcePlacement... type)", name, strings.Join(short, ", "))
}

// check reports whether crp meets f and, if not, what it shows instead. A
// condition observed for an older generation does not count: it describes
// the previous spec.
func (f waitFor) check(crp *api.ClusterResourcePlacement) (bool, string) {
	condition := f.condition
	if crp.IsResourcePlacement() {
		condition = api.ResourcePlacementConditionType(condition)
	}
	c := meta.FindStatusCondition(crp.Status.Conditions, condition)
	if c == nil {
		return false, fmt.Sprintf("%s is not reported yet", condition)
	}
	state := fmt.Sprintf("%s is %s", c.Type, c.Status)
	if c.Reason != "" || c.Message != "" {
		state += fmt.Sprintf(" (%s: %s)", c.Reason, oneLine(c.Message))
	}
	if crp.Generation > 0 && c.ObservedGeneration < crp.Generation {
		return false, fmt.Sprintf("%s, observed for generation %d; the placement is at generation %d", state, c.ObservedGeneration, crp.Generation)
	}
	return c.Status == f.status, state
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) waitCommand() *cobra.Command {
	var forFlag, namespace string
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "wait (crp|rp) NAME... --for=condition=Applied [--timeout=30s] [-n NS]",
		Short: "Wait until placements reach a condition, or are deleted",
		Long: `Wait blocks until each named placement has the condition with the wanted status (True
by default) for its current generation, or is gone with --for=delete. Condition names may
be short (Scheduled, RolloutStarted, WorkSynchronized, Applied, Available, DiffReported) or
the full ClusterResourcePlacement... type. It exits non-zero after --timeout, printing the
condition as it stands; a placement not known yet is waited for (apply publishes before the
status service has seen it). It wakes on the placement's status events and polls too.`,
		Example: `  fleetctl apply -f web-2-crp.yaml && fleetctl wait crp web-2-crp --for=condition=Applied --timeout=2m
  fleetctl wait crp web-2-crp --for=condition=Applied=False
  fleetctl delete crp web-2-crp && fleetctl wait crp web-2-crp --for=delete`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if r != placements && r != resourcePlacements {
				return usageError(cmd, "wait works on placements: fleetctl wait crp NAME --for=condition=Applied, or wait rp NAME -n NAMESPACE")
			}
			if len(names) == 0 {
				return usageError(cmd, "name the placement(s) to wait for")
			}
			if forFlag == "" {
				return usageError(cmd, "--for is required, e.g. --for=condition=Applied")
			}
			f, err := parseWaitFor(forFlag)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if timeout <= 0 {
				return usageError(cmd, "--timeout must be positive, not %s", timeout)
			}
			if interval <= 0 {
				return usageError(cmd, "--poll-interval must be positive, not %s", interval)
			}
			target := waitTarget{resource: r}
			if r == resourcePlacements {
				target.namespace = namespace
			}
			return a.wait(cmd.Context(), target, names, f, timeout, interval)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the resourceplacements")
	cmd.Flags().StringVar(&forFlag, "for", "", "delete, or condition=NAME[=True|False|Unknown]")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait before giving up")
	cmd.Flags().DurationVar(&interval, "poll-interval", time.Second, "how often to ask the status service between status events")
	return cmd
}

// waitTarget is the kind of placement waited for: a ResourcePlacement has a namespace.
type waitTarget struct {
	resource  resource
	namespace string
}

func (a *app) wait(ctx context.Context, target waitTarget, names []string, f waitFor, timeout, interval time.Duration) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, name := range names {
		if err := a.waitOne(ctx, nc, q, target, name, f, interval); err != nil {
			return err
		}
		if f.deleted {
			fmt.Fprintf(a.out, "%s/%s deleted\n", target.resource.display(), name)
		} else {
			fmt.Fprintf(a.out, "%s/%s condition met\n", target.resource.display(), name)
		}
	}
	return nil
}

func (a *app) waitOne(ctx context.Context, nc *nats.Conn, q *query.Client, target waitTarget, name string, f waitFor, interval time.Duration) error {
	key := api.PlacementKey(target.namespace, name) // the services know a placement by its key
	// Status events wake the loop at once; polling covers a missed event and
	// a status service that answers but publishes nothing new.
	wake := make(chan struct{}, 1)
	if subject, err := events.StatusSubject(key); err == nil {
		sub, err := nc.Subscribe(subject, func(*nats.Msg) {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
		if err == nil {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	// Right after `fleetctl apply`, the status service may still describe the
	// previous spec, its conditions already met: wait for the spec last
	// published on the bus.
	latest := a.latestSpec(ctx, nc, key)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	current := "no answer from the status service yet"
	for {
		crp, err := q.Placement(ctx, key)
		switch {
		case errors.Is(err, query.ErrNotFound):
			if f.deleted {
				return nil
			}
			current = "the placement is not known to the status service yet"
		case errors.Is(err, query.ErrNoStatusService):
			current = err.Error()
		case err != nil && ctx.Err() != nil:
			// The deadline passed during the query.
		case err != nil:
			return err
		case f.deleted:
			current = "the placement still exists"
		case latest != nil && !sameSpec(&crp.Spec, latest):
			current = "the status service has not caught up with the latest spec published for the placement yet"
		default:
			met, state := f.check(crp)
			if met {
				return nil
			}
			current = state
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out waiting for %s of %s/%s: %s", f, target.resource.display(), name, current)
			}
			return ctx.Err()
		case <-wake:
		case <-ticker.C:
		}
	}
}

// latestSpec is the defaulted spec of the last PlacementUpserted event
// published for the placement, or nil when there is none or it cannot be read
// (credentials without access to the stream, for one).
func (a *app) latestSpec(ctx context.Context, nc *nats.Conn, name string) *api.PlacementSpec {
	subject, err := events.PlacementSubject(name)
	if err != nil {
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	stream, err := js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		return nil
	}
	raw, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return nil
	}
	ev, err := bus.Decode(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
	if err != nil || events.Admit(raw.Subject, ev) != nil {
		return nil // what the consumers would dead-letter is no placement's spec
	}
	p, err := events.DecodeAs[events.PlacementUpserted](ev)
	if err != nil {
		return nil
	}
	api.SetDefaults(&p.Placement)
	return &p.Placement.Spec
}

// sameSpec compares two defaulted specs.
func sameSpec(a, b *api.PlacementSpec) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
