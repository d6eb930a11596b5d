package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-dev/flotilla/events/api"
)

// envHubKubeconfig is the hub's kubeconfig, as hubsync reads it.
const envHubKubeconfig = "FLOTILLA_HUB_KUBECONFIG"

// hubWait bounds the wait for hubsync to bring a cordon from the hub to Flotilla.
const hubWait = 2 * time.Minute

func (a *app) hubFlag(cmd *cobra.Command, hub *string) {
	cmd.Flags().StringVar(hub, "hub-kubeconfig", a.getenv(envHubKubeconfig),
		"kubeconfig of the hub cluster, to cordon a member kept there (hubsync) (env "+envHubKubeconfig+")")
}

// cordonOnHub sets (or removes) the cordon taint on the hub's MemberCluster, which
// hubsync keeps, and waits until Flotilla has it: the scheduler must know the member is
// cordoned before drain evicts, or it would pick the member again.
func (a *app) cordonOnHub(ctx context.Context, nc *nats.Conn, kubeconfig, cluster string, on bool) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("hub kubeconfig %s: %w", kubeconfig, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	members := dyn.Resource(api.ClusterGroupVersion.WithResource("memberclusters"))
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := members.Get(ctx, cluster, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints, _, err := unstructured.NestedSlice(u.Object, "spec", "taints")
		if err != nil {
			return fmt.Errorf("spec.taints: %w", err)
		}
		taints = slices.DeleteFunc(taints, func(t any) bool {
			m, ok := t.(map[string]any)
			return ok && m["key"] == api.CordonTaint.Key && m["value"] == api.CordonTaint.Value && m["effect"] == string(api.CordonTaint.Effect)
		})
		if on {
			taints = append(taints, map[string]any{"key": api.CordonTaint.Key, "value": api.CordonTaint.Value, "effect": string(api.CordonTaint.Effect)})
		}
		if err := unstructured.SetNestedSlice(u.Object, taints, "spec", "taints"); err != nil {
			return err
		}
		_, err = members.Update(ctx, u, metav1.UpdateOptions{FieldManager: "fleetctl"})
		return err
	})
	if err != nil {
		return fmt.Errorf("cordon member cluster %s on the hub: %w", cluster, err)
	}
	ctx, cancel := context.WithTimeout(ctx, hubWait)
	defer cancel()
	q := a.queryClient(nc)
	for {
		m, err := q.Member(ctx, cluster)
		if err == nil && slices.Contains(m.Spec.Taints, api.CordonTaint) == on {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member cluster %s: the hub has the change, Flotilla not yet (is hubsync running?): %w", cluster, errors.Join(ctx.Err(), err))
		case <-time.After(time.Second):
		}
	}
}
