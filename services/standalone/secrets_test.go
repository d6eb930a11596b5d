package standalone

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// Secret values used by the test: each must reach the member, and nothing else.
const (
	secretPassword = "pw-Zq8xV3-only-on-the-member"
	secretToken    = "tok-Lr5nW2-only-on-the-member"
	envelopedValue = "env-Hk7pT4-only-on-the-member"
)

const secretPlacement = `
apiVersion: v1
kind: Namespace
metadata:
  name: vault
---
apiVersion: v1
kind: Secret
metadata:
  name: db
  namespace: vault
type: Opaque
data:
  password: %s
stringData:
  token: %s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: wrapped
  namespace: vault
  annotations:
    kubernetes-fleet.io/envelope-configmap: "true"
data:
  secret.yaml: |
    apiVersion: v1
    kind: Secret
    metadata:
      name: wrapped
      namespace: vault
    stringData:
      value: %s
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: vault
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: vault
  policy:
    placementType: PickAll
`

// A Secret placed through the real services, with NATS over mutual TLS: it reaches the
// member, and its values (plain or base64) appear in no table or view of the database, in no
// line of the services' log, and in nothing fleetctl shows.
func TestSecretsStayOnTheMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts NATS, PostgreSQL and a member cluster")
	}
	members := kube.StartT(t, 1)
	dir := t.TempDir()
	data, err := os.ReadFile(members.Kubeconfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vault-east.kubeconfig"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := postgres.NewTestDB(t)
	run := start(t, Config{DataDir: t.TempDir(), KubeconfigDir: dir, DatabaseURL: dbURL, NATSTLS: true})
	if run.TLS == nil || !strings.HasPrefix(run.NATSURL, "tls://") {
		t.Fatalf("NATS at %s with client TLS %+v: want TLS", run.NATSURL, run.TLS)
	}
	if nc, err := nats.Connect(strings.Replace(run.NATSURL, "tls://", "nats://", 1), nats.Timeout(5*time.Second), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Error("a client without the CA and a client certificate connected")
	}
	settings := natsconn.Settings{URL: run.NATSURL, CA: run.TLS.CA, Cert: run.TLS.Cert, Key: run.TLS.Key}
	nc, err := settings.Connect("secrets-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	q := query.New(nc)
	waitFor(t, "vault-east to join", func(ctx context.Context) (*api.MemberCluster, error) {
		m, err := q.Member(ctx, "vault-east")
		if err != nil || !joined(m) {
			return nil, fmt.Errorf("not joined: %v", err)
		}
		return m, nil
	})

	b64 := base64.StdEncoding.EncodeToString([]byte(secretPassword))
	fleetctl := func(stdin string, args ...string) string {
		t.Helper()
		var out strings.Builder
		flags := []string{"--nats", run.NATSURL, "--nats-ca", run.TLS.CA, "--nats-cert", run.TLS.Cert, "--nats-key", run.TLS.Key}
		if err := cli.Run(t.Context(), append(flags, args...), cli.Options{In: strings.NewReader(stdin), Out: &out, Err: &out,
			Getenv: func(string) string { return "" }}); err != nil {
			t.Fatalf("fleetctl %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	applied := fleetctl(fmt.Sprintf(secretPlacement, b64, secretToken, envelopedValue), "apply", "-f", "-")

	secrets := memberSecrets(t, members)
	waitFor(t, "Secret vault/db on the member with its values", func(ctx context.Context) (any, error) {
		s, err := secrets.Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		d, _, _ := unstructuredString(s.Object, "data", "password")
		tok, _, _ := unstructuredString(s.Object, "data", "token")
		if d != b64 || tok != base64.StdEncoding.EncodeToString([]byte(secretToken)) {
			return nil, fmt.Errorf("data %v", s.Object["data"])
		}
		return nil, nil
	})
	waitFor(t, "the enveloped Secret vault/wrapped on the member", func(ctx context.Context) (any, error) {
		return secrets.Get(ctx, "wrapped", metav1.GetOptions{})
	})
	crp := waitFor(t, "placement vault to be applied", func(ctx context.Context) (*api.ClusterResourcePlacement, error) {
		crp, err := q.Placement(ctx, "vault")
		if err != nil {
			return nil, err
		}
		if c := findCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType)); c == nil || c.Status != metav1.ConditionTrue {
			return nil, fmt.Errorf("conditions %s", summarize(crp.Status.Conditions))
		}
		return crp, nil
	})

	needles := []string{secretPassword, b64, secretToken, base64.StdEncoding.EncodeToString([]byte(secretToken)),
		envelopedValue, base64.StdEncoding.EncodeToString([]byte(envelopedValue))}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	relations, found, err := postgres.Search(t.Context(), pool, needles...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read every row of %d tables and views", len(relations))
	if len(relations) < 20 {
		t.Errorf("only %d tables and views: %v", len(relations), relations)
	}
	for _, x := range found {
		t.Errorf("a Secret value is stored: %s", x)
	}
	var sealed int
	if err := pool.QueryRow(t.Context(), `select count(*) from hub_resources where manifest ? 'flotilla.io/sealed'`).Scan(&sealed); err != nil || sealed != 2 {
		t.Errorf("%d sealed hub objects (%v), want the Secret and the envelope", sealed, err)
	}

	logText, err := os.ReadFile(filepath.Join(run.DataDir, "test.log"))
	if err != nil {
		t.Fatal(err)
	}
	shown := applied + fleetctl("", "get", "crp", "vault", "-o", "json") + fleetctl("", "describe", "crp", "vault") +
		fleetctl("", "history", "crp", "vault") + mustJSONString(t, crp)
	for _, n := range needles {
		if strings.Contains(string(logText), n) {
			t.Errorf("the services' log (debug level) shows %q", n)
		}
		if strings.Contains(shown, n) {
			t.Errorf("fleetctl shows %q", n)
		}
	}
}

func memberSecrets(t *testing.T, members *kube.Env) dynamic.ResourceInterface {
	t.Helper()
	c, err := dynamic.NewForConfig(members.RESTConfig("member-1"))
	if err != nil {
		t.Fatal(err)
	}
	return c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Namespace("vault")
}

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, errors.New("not an object")
		}
		cur = m[f]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
