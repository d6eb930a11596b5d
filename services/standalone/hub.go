package standalone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/hubsync"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// hubName is the local hub cluster's name among the kube environment's API servers.
const hubName = "hub"

// HubKubeconfigFile is the hub's kubeconfig, in the data dir.
const HubKubeconfigFile = "hub.kubeconfig"

func (r *runner) hubKubeconfig() string {
	if !r.cfg.Hub {
		return ""
	}
	return filepath.Join(r.cfg.DataDir, HubKubeconfigFile)
}

// runHubsync runs the hub connector against the local hub, with its admission webhook on a
// loopback port the hub's API server reaches.
func (r *runner) runHubsync(ctx context.Context, opts service.Options) error {
	opts.Role = service.Connector
	return hubsync.Run(ctx, hubsync.Config{Options: opts, REST: r.kube.RESTConfig(hubName), WebhookListen: "127.0.0.1:0"})
}

// registerMembersOnHub makes every member join the fleet as kubectl apply of its
// MemberCluster on the hub would, unless the hub has it already (a restart must not undo what
// the user changed there), and waits until the fleet knows them: the apply workers start
// then, and their first heartbeat counts.
func (r *runner) registerMembersOnHub(ctx context.Context, q *queries) error {
	done := r.out.step("Registering the member clusters on the hub")
	client, err := dynamic.NewForConfig(r.kube.RESTConfig(hubName))
	if err != nil {
		done("failed")
		return err
	}
	members := client.Resource(crds.Member.GVR())
	if err := waitForCRD(ctx, members); err != nil {
		done("failed")
		return err
	}
	dir := filepath.Join(r.cfg.DataDir, "memberclusters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		done("failed")
		return fmt.Errorf("memberclusters dir: %w", err)
	}
	var created, known []string
	for _, m := range r.members {
		if _, err := members.Get(ctx, m.Name, metav1.GetOptions{}); err == nil {
			known = append(known, m.Name)
			continue
		} else if !apierrors.IsNotFound(err) {
			done("failed")
			return fmt.Errorf("look up member %s on the hub: %w", m.Name, err)
		}
		obj, err := r.memberClusterObject(dir, m)
		if err != nil {
			done("failed")
			return err
		}
		if _, err := members.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}); err != nil && !apierrors.IsAlreadyExists(err) {
			done("failed")
			return fmt.Errorf("create MemberCluster %s on the hub: %w", m.Name, err)
		}
		created = append(created, m.Name)
	}
	if len(known) > 0 {
		r.out.linef("already on the hub: %s", strings.Join(known, ", "))
	}
	if len(created) > 0 {
		r.out.linef("created on the hub: %s (as kubectl --kubeconfig %s apply -f %s would)", strings.Join(created, ", "),
			r.rel(r.hubKubeconfig()), r.rel(dir))
	}
	if err := waitForMembers(ctx, q, created); err != nil {
		done("failed")
		return err
	}
	done(fmt.Sprintf("%d member(s) in the fleet (MemberCluster files in %s); starting their apply workers", len(r.members), r.rel(dir)))
	return nil
}

// memberClusterObject reads the member's MemberCluster file, written first when missing.
func (r *runner) memberClusterObject(dir string, m Member) (*unstructured.Unstructured, error) {
	path := filepath.Join(dir, m.Name+".yaml")
	if !fileExists(path) {
		apply := "kubectl --kubeconfig " + r.hubKubeconfig() + " apply -f " + path
		if err := writeMemberCluster(path, m, r.cfg.HeartbeatPeriod.Seconds(), apply); err != nil {
			return nil, err
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Name, err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("member %s: %s: %w", m.Name, path, err)
	}
	return obj, nil
}

// waitForCRD waits until the hub serves MemberClusters: hubsync installs the CRDs as it
// starts.
func waitForCRD(ctx context.Context, members dynamic.ResourceInterface) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := members.List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the hub does not serve MemberClusters (has hubsync started?): %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitForMembers waits until the status service knows each member.
func waitForMembers(ctx context.Context, q *queries, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, name := range names {
		for {
			_, err := q.client.Member(ctx, name)
			if err == nil {
				break
			}
			if !errors.Is(err, errNotFound) && ctx.Err() == nil {
				return fmt.Errorf("look up member %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("member %s, created on the hub, did not join the fleet: is hubsync running? (%v)", name, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
