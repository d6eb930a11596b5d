package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
)

// drain and uncordon are upstream's kubectl fleet draincluster and
// uncordoncluster: the cordon taint keeps the scheduler from picking the
// member again, and an eviction per placement removes what is on it, each
// within the placement's disruption budget.

func (a *app) drainCommand() *cobra.Command {
	var timeout, interval time.Duration
	var hub string
	cmd := &cobra.Command{
		Use:   "drain CLUSTER",
		Short: "Cordon a member cluster and evict every placement from it, within their disruption budgets",
		Long: `Drain cordons the member cluster, adding the taint cordon-key=cordon-value:NoSchedule so
that no placement is scheduled onto it again, then creates a ClusterResourcePlacementEviction
(drain-eviction-<placement>-<cluster>-<suffix>) for every placement on it and waits for each
to run, printing what it did. An eviction the placement's ClusterResourcePlacementDisruptionBudget
does not allow is not executed; drain then ends with an error naming it, the member stays
cordoned, and running drain again later evicts what is left. Evictions of PickFixed placements
are refused: remove the cluster from the placement's clusterNames. Undo the cordon with
fleetctl uncordon. When the member is kept on a hub cluster (hubsync), drain sets the taint
on the hub's MemberCluster (--hub-kubeconfig, or $FLOTILLA_HUB_KUBECONFIG) and waits until
hubsync has brought it to Flotilla.`,
		Example: `  fleetctl drain member-1
  fleetctl drain member-1 --timeout 10m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return a.drain(ctx, args[0], hub, interval)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the evictions to run")
	cmd.Flags().DurationVar(&interval, "poll-interval", time.Second, "how often to ask the status service whether an eviction ran")
	a.hubFlag(cmd, &hub)
	return cmd
}

func (a *app) uncordonCommand() *cobra.Command {
	var hub string
	cmd := &cobra.Command{
		Use:   "uncordon CLUSTER",
		Short: "Remove the cordon taint fleetctl drain put on a member cluster",
		Long: `Uncordon removes the taint cordon-key=cordon-value:NoSchedule from the member cluster, so that
placements may be scheduled onto it again. What drain evicted comes back only where a
placement's policy picks the cluster again (a PickAll placement does). A member kept on a
hub cluster is uncordoned there (--hub-kubeconfig).`,
		Example: `  fleetctl uncordon member-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.cordon(cmd.Context(), args[0], hub, false)
		},
	}
	a.hubFlag(cmd, &hub)
	return cmd
}

// cordon adds (or removes) the cordon taint of the member, publishing its
// update only when that changes it.
func (a *app) cordon(ctx context.Context, cluster, hub string, on bool) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	return a.setCordon(ctx, nc, cluster, hub, on)
}

func (a *app) setCordon(ctx context.Context, nc *nats.Conn, cluster, hub string, on bool) error {
	m, err := a.queryClient(nc).Member(ctx, cluster)
	if errors.Is(err, query.ErrNotFound) {
		return notFound(members, cluster)
	}
	if err != nil {
		return err
	}
	has := slices.Contains(m.Spec.Taints, api.CordonTaint)
	if has != on {
		u := *m
		u.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
		u.Status = api.MemberClusterStatus{}
		u.Spec.Taints = slices.DeleteFunc(slices.Clone(m.Spec.Taints), func(t api.Taint) bool { return t == api.CordonTaint })
		if on {
			u.Spec.Taints = append(u.Spec.Taints, api.CordonTaint)
		}
		subject, err := events.MemberSubject(cluster)
		if err != nil {
			return err
		}
		pub, err := a.publisher(ctx, nc)
		if err != nil {
			return err
		}
		c := change.Change{Type: events.TypeMemberUpdated, Subject: subject, EventSubject: cluster, Payload: events.MemberUpdated{Member: u}}
		_, err = pub.PublishAll(ctx, []change.Change{c})
		if errors.Is(err, submit.ErrHubOwned) && hub != "" {
			err = a.cordonOnHub(ctx, nc, hub, cluster, on)
		} else if errors.Is(err, submit.ErrHubOwned) {
			return fmt.Errorf("member cluster %s is kept on the hub cluster: set its cordon taint there "+
				`(kubectl patch membercluster %s --type merge -p '{"spec":{"taints":[{"key":"%s","value":"%s","effect":"%s"}]}}', `+
				"or remove it to uncordon) and run fleetctl again, which then finds the member cordoned; "+
				"or give fleetctl the hub's kubeconfig (--hub-kubeconfig or $%s) to do it", cluster, cluster,
				api.CordonTaint.Key, api.CordonTaint.Value, api.CordonTaint.Effect, envHubKubeconfig)
		}
		if err != nil {
			return fmt.Errorf("update member cluster %s: %w", cluster, err)
		}
	}
	if on {
		fmt.Fprintf(a.out, "cordoned member cluster %s (taint %s=%s:%s)\n", cluster, api.CordonTaint.Key, api.CordonTaint.Value, api.CordonTaint.Effect)
	} else {
		fmt.Fprintf(a.out, "uncordoned member cluster %s\n", cluster)
	}
	return nil
}

func (a *app) drain(ctx context.Context, cluster, hub string, interval time.Duration) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := a.setCordon(ctx, nc, cluster, hub, true); err != nil {
		return err
	}
	q := a.queryClient(nc)
	crps, err := q.Placements(ctx, "")
	if err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	var on []string
	for _, p := range crps {
		if slices.ContainsFunc(p.Status.PlacementStatuses, func(s api.ResourcePlacementStatus) bool { return s.ClusterName == cluster }) {
			on = append(on, p.Name)
		}
	}
	if len(on) == 0 {
		fmt.Fprintf(a.out, "no placement has resources on %s\n", cluster)
		return nil
	}
	pub, err := a.publisher(ctx, nc)
	if err != nil {
		return err
	}
	var blocked []string
	for _, crp := range on {
		e := &api.ClusterResourcePlacementEviction{
			TypeMeta:   metav1.TypeMeta{APIVersion: api.PlacementGroupVersion.String(), Kind: api.ClusterResourcePlacementEvictionKind},
			ObjectMeta: metav1.ObjectMeta{Name: drainEvictionName(crp, cluster)},
			Spec:       api.PlacementEvictionSpec{PlacementName: crp, ClusterName: cluster},
		}
		if errs := api.ValidateEviction(e); len(errs) > 0 {
			return fmt.Errorf("eviction for placement %s: %w", crp, errs)
		}
		c, err := change.DisruptionUpserted(e)
		if err != nil {
			return err
		}
		if _, err := pub.PublishAll(ctx, []change.Change{c}); err != nil {
			return fmt.Errorf("create eviction %s: %w", e.Name, err)
		}
		fmt.Fprintf(a.out, "created eviction %s for placement %s on %s\n", e.Name, crp, cluster)
		ran, err := awaitEviction(ctx, q, e.Name, interval)
		if err != nil {
			return fmt.Errorf("wait for eviction %s: %w", e.Name, err)
		}
		if ok := a.reportEviction(ran); !ok {
			blocked = append(blocked, ran.Name)
		}
	}
	if len(blocked) > 0 {
		return fmt.Errorf("drain of %s is not complete: %d eviction(s) not executed (%v); the cluster stays cordoned, run drain again to retry", cluster, len(blocked), blocked)
	}
	fmt.Fprintf(a.out, "drained %s; fleetctl uncordon %s lets placements be scheduled onto it again\n", cluster, cluster)
	return nil
}

// reportEviction prints what an eviction did and reports whether the drain
// may count it done: executed, or invalid because there was nothing to evict.
func (a *app) reportEviction(e *api.ClusterResourcePlacementEviction) bool {
	valid := meta.FindStatusCondition(e.Status.Conditions, api.EvictionConditionValid)
	if valid != nil && valid.Status == metav1.ConditionFalse {
		fmt.Fprintf(a.out, "eviction %s is invalid: %s\n", e.Name, valid.Message)
		return valid.Message == api.EvictionInvalidMissingCRPMessage || valid.Message == api.EvictionInvalidMissingCRBMessage
	}
	executed := meta.FindStatusCondition(e.Status.Conditions, api.EvictionConditionExecuted)
	if executed == nil || executed.Status != metav1.ConditionTrue {
		msg := "no Executed condition"
		if executed != nil {
			msg = executed.Message
		}
		fmt.Fprintf(a.out, "eviction %s was not executed: %s\n", e.Name, msg)
		return false
	}
	fmt.Fprintf(a.out, "eviction %s executed: %s\n", e.Name, executed.Message)
	return true
}

// awaitEviction asks for the eviction until the scheduler has run it.
func awaitEviction(ctx context.Context, q *query.Client, name string, interval time.Duration) (*api.ClusterResourcePlacementEviction, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		e, err := q.Eviction(ctx, name)
		switch {
		case err == nil && (meta.IsStatusConditionFalse(e.Status.Conditions, api.EvictionConditionValid) ||
			meta.FindStatusCondition(e.Status.Conditions, api.EvictionConditionExecuted) != nil):
			return e, nil
		case err != nil && !errors.Is(err, query.ErrNotFound):
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the eviction did not run: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// drainEvictionName is upstream's: drain-eviction-<placement>-<cluster>-<8 random hex>.
func drainEvictionName(crp, cluster string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return fmt.Sprintf("drain-eviction-%s-%s-%s", crp, cluster, hex.EncodeToString(b))
}
