package standalone

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// Members given as kubeconfig files, with a database named by URL: the way to point the
// standalone process at clusters it did not start (kind, k3d, AKS).
func TestKubeconfigDirAndExternalDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS, PostgreSQL and a member cluster")
	}
	env := kube.StartT(t, 1)
	dir := t.TempDir()
	data, err := os.ReadFile(env.Kubeconfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	// The member's name is the file's.
	if err := os.WriteFile(filepath.Join(dir, "prod-east.kubeconfig"), data, 0o600); err != nil {
		t.Fatal(err)
	}

	run := start(t, Config{DataDir: t.TempDir(), KubeconfigDir: dir, DatabaseURL: postgres.NewTestDB(t)})
	if len(run.Members) != 1 || run.Members[0].Name != "prod-east" || run.Members[0].Local {
		t.Fatalf("members %+v, want prod-east from the kubeconfig dir", run.Members)
	}
	_, q := connect(t, run.NATSURL)
	waitFor(t, "prod-east to join and report healthy", func(ctx context.Context) (*api.MemberCluster, error) {
		m, err := q.Member(ctx, "prod-east")
		if err != nil {
			return nil, err
		}
		if !joined(m) || !healthy(m) {
			return nil, errors.New("not joined and healthy yet")
		}
		return m, nil
	})

	placement := `
apiVersion: v1
kind: Namespace
metadata:
  name: billing
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: billing
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: billing
  policy:
    placementType: PickAll
`
	var out strings.Builder
	err = cli.Run(t.Context(), []string{"--nats", run.NATSURL, "apply", "-f", "-"},
		cli.Options{In: strings.NewReader(placement), Out: &out, Err: &out, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("fleetctl apply: %v\n%s", err, out.String())
	}
	c, err := dynamic.NewForConfig(env.RESTConfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "namespace billing on the member", func(ctx context.Context) (any, error) {
		return c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "billing", metav1.GetOptions{})
	})
	if _, err := os.Stat(filepath.Join(run.DataDir, "postgres")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a local PostgreSQL was started although a database URL was given (stat: %v)", err)
	}
}
