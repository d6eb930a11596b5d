package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
)

// patience bounds every wait for the fleet to converge. It is generous on purpose: the
// machine may be slow and busy, and the bound only stops a test that would never pass.
const patience = 10 * time.Minute

// step is the time between two looks while waiting: each look runs fleetctl or calls a
// member's API server.
const step = time.Second

// kubectl runs the real kubectl (from the kube binaries, FLOTILLA_KUBE_BIN_DIR) against the
// stack's hub cluster, as a user types kubectl --kubeconfig <hub> args..., with stdin as its
// standard input. It returns what kubectl printed on stdout, and stderr within its error.
func (s *stack) kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	bin, err := kube.BinDir()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", s.HubKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// onHub runs kubectl against the hub and fails the test if it fails; it returns stdout.
func (s *stack) onHub(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := s.kubectl(t.Context(), stdin, args...)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\ninput:\n%s", err, out, stdin)
	}
	return out
}

// fleetctl runs fleetctl with args against the stack, as a user types it, with stdin as its
// standard input. It returns what fleetctl printed on stdout and stderr, and its error.
func (s *stack) fleetctl(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = cli.Run(ctx, append([]string{"--nats", s.NATSURL}, args...), cli.Options{
		In:     strings.NewReader(stdin),
		Out:    &out,
		Err:    &errOut,
		Getenv: func(string) string { return "" }, // this stack only, whatever the environment says
	})
	return out.String(), errOut.String(), err
}

// run runs fleetctl and fails the test if it fails; it returns stdout.
func (s *stack) run(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := s.fleetctl(t.Context(), "", args...)
	if err != nil {
		t.Fatalf("fleetctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// apply runs `fleetctl apply -f -` with manifests on standard input and returns what it
// printed.
func (s *stack) apply(t *testing.T, manifests string) string {
	t.Helper()
	out, errOut, err := s.fleetctl(t.Context(), manifests, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("fleetctl apply: %v\nstdout:\n%s\nstderr:\n%s\ninput:\n%s", err, out, errOut, manifests)
	}
	t.Logf("fleetctl apply:\n%s", strings.TrimSpace(out))
	return out
}

// applyFile runs `fleetctl apply -f testdata/<name>`.
func (s *stack) applyFile(t *testing.T, name string) string {
	t.Helper()
	out := s.run(t, "apply", "-f", filepath.Join("testdata", name))
	t.Logf("fleetctl apply -f testdata/%s:\n%s", name, strings.TrimSpace(out))
	return out
}

// deleteAtEnd deletes the placements when the test ends and waits until the status service
// no longer knows them, so that the next test finds the members as they were.
func (s *stack) deleteAtEnd(t *testing.T, placements ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		args := append([]string{"delete", "crp"}, placements...)
		if out, errOut, err := s.fleetctl(ctx, "", args...); err != nil {
			t.Errorf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			return
		}
		args = append(append([]string{"wait", "crp"}, placements...), "--for=delete", "--timeout="+patience.String())
		if out, errOut, err := s.fleetctl(ctx, "", args...); err != nil {
			t.Errorf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
	})
}

// placement is `fleetctl get crp NAME -o json`, decoded.
func (s *stack) placement(t *testing.T, name string) (*api.ClusterResourcePlacement, error) {
	t.Helper()
	out, errOut, err := s.fleetctl(t.Context(), "", "get", "crp", name, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("fleetctl get crp %s -o json: %v %s", name, err, errOut)
	}
	var crp api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(out), &crp); err != nil {
		return nil, fmt.Errorf("fleetctl get crp %s -o json printed what is not a placement: %v\n%s", name, err, out)
	}
	return &crp, nil
}

// placementWhen waits until check accepts the placement as `fleetctl get crp NAME -o json`
// shows it, and returns it as check last saw it.
func (s *stack) placementWhen(t *testing.T, name, what string, check func(*api.ClusterResourcePlacement) error) *api.ClusterResourcePlacement {
	t.Helper()
	var crp *api.ClusterResourcePlacement
	poll.Every(t, step, patience, what, func() (err error) {
		if crp, err = s.placement(t, name); err != nil {
			return err
		}
		return check(crp)
	})
	return crp
}

// converged waits until the placement, at generation or later, is scheduled, applied and
// available on every cluster the policy wants, and returns it. The generation matters: apply
// only publishes, so right after it the status service may still report the previous spec,
// converged. (fleetctl wait, which knows no generation to expect, has the same blind spot.)
func (s *stack) converged(t *testing.T, name string, generation int64) *api.ClusterResourcePlacement {
	t.Helper()
	return s.placementWhen(t, name, fmt.Sprintf("placement %s at generation %d to be applied and available", name, generation), func(crp *api.ClusterResourcePlacement) error {
		if crp.Generation < generation {
			return fmt.Errorf("the placement is at generation %d", crp.Generation)
		}
		for _, typ := range []api.ClusterResourcePlacementConditionType{
			api.ClusterResourcePlacementScheduledConditionType,
			api.ClusterResourcePlacementAppliedConditionType,
			api.ClusterResourcePlacementAvailableConditionType,
		} {
			if err := conditionTrue(crp.Status.Conditions, string(typ), crp.Generation); err != nil {
				return err
			}
		}
		return nil
	})
}

// conditionTrue says what is wrong unless the condition is True for the generation.
func conditionTrue(conds []metav1.Condition, typ string, generation int64) error {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition yet (conditions: %s)", typ, summarize(conds))
	case c.ObservedGeneration < generation:
		return fmt.Errorf("%s is observed for generation %d, the placement is at %d", typ, c.ObservedGeneration, generation)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%s is %s (%s: %s)", typ, c.Status, c.Reason, c.Message)
	}
	return nil
}

func summarize(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", strings.TrimPrefix(c.Type, "ClusterResourcePlacement"), c.Status, c.Reason))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// scheduledClusters are the clusters the placement's status reports as scheduled, sorted.
func scheduledClusters(crp *api.ClusterResourcePlacement) []string {
	var out []string
	for _, ps := range crp.Status.PlacementStatuses {
		if c := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterScheduledConditionType)); c != nil && c.Status == metav1.ConditionTrue {
			out = append(out, ps.ClusterName)
		}
	}
	slices.Sort(out)
	return out
}

// clusterStatus is the placement's status entry for cluster, or nil.
func clusterStatus(crp *api.ClusterResourcePlacement, cluster string) *api.ResourcePlacementStatus {
	for i := range crp.Status.PlacementStatuses {
		if crp.Status.PlacementStatuses[i].ClusterName == cluster {
			return &crp.Status.PlacementStatuses[i]
		}
	}
	return nil
}

// clusterFailures is the seed's jq selection of a placement's status, computed as jq would:
//
//	fleetctl get crp NAME -o jsonpath='{.status.placementStatuses}' \
//	  | jq '[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})'
type clusterFailures struct {
	ClusterName      string                        `json:"clusterName"`
	FailedPlacements []api.FailedResourcePlacement `json:"failedPlacements"`
}

func (s *stack) failedPlacements(t *testing.T, name string) ([]clusterFailures, error) {
	t.Helper()
	out, errOut, err := s.fleetctl(t.Context(), "", "get", "clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io", name,
		"-o", "jsonpath={.status.placementStatuses}")
	if err != nil {
		return nil, fmt.Errorf("fleetctl get -o jsonpath: %v %s", err, errOut)
	}
	if strings.TrimSpace(out) == "" {
		return nil, errors.New("no placementStatuses yet")
	}
	var statuses []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &statuses); err != nil {
		return nil, fmt.Errorf("the jsonpath output is not a JSON list: %v\n%s", err, out)
	}
	var selected []clusterFailures
	for _, st := range statuses {
		raw, ok := st["failedPlacements"]
		if !ok || string(raw) == "null" {
			continue
		}
		var cf clusterFailures
		if err := json.Unmarshal(st["clusterName"], &cf.ClusterName); err != nil {
			return nil, fmt.Errorf("clusterName: %v", err)
		}
		if err := json.Unmarshal(raw, &cf.FailedPlacements); err != nil {
			return nil, fmt.Errorf("failedPlacements of %s: %v", cf.ClusterName, err)
		}
		selected = append(selected, cf)
	}
	slices.SortFunc(selected, func(a, b clusterFailures) int { return strings.Compare(a.ClusterName, b.ClusterName) })
	return selected, nil
}

var errNoFailures = errors.New("no failedPlacements yet")

// takeovers is `fleetctl takeovers --placement NAME -o json`, decoded.
func (s *stack) takeovers(t *testing.T, placement string) []events.TakeoverRecord {
	t.Helper()
	out := s.run(t, "takeovers", "--placement", placement, "-o", "json")
	var records []events.TakeoverRecord
	if err := json.Unmarshal([]byte(out), &records); err != nil {
		t.Fatalf("fleetctl takeovers -o json printed %v:\n%s", err, out)
	}
	return records
}

// latestTakeover is the newest decision about one object on one cluster, or nil.
func latestTakeover(records []events.TakeoverRecord, cluster, kind, name string) *events.TakeoverRecord {
	var latest *events.TakeoverRecord
	for i, r := range records {
		if r.Cluster == cluster && r.Resource.Kind == kind && r.Resource.Name == name &&
			(latest == nil || !r.DecidedAt.Before(latest.DecidedAt)) {
			latest = &records[i]
		}
	}
	return latest
}

// member is a client of a member cluster, as kubectl with its kubeconfig would be.
func (s *stack) member(name string) kubernetes.Interface { return s.kube[name] }

// memberNames are the members the stack started, member-1 ... member-4.
func (s *stack) memberNames() []string {
	names := make([]string, 0, len(s.Members))
	for _, m := range s.Members {
		names = append(names, m.Name)
	}
	return names
}

// memberClusterFile is the MemberCluster a local member joined with, as standalone wrote it;
// `kubectl apply -f` of it on the hub joins the member again with its original labels.
func (s *stack) memberClusterFile(name string) string {
	return filepath.Join(s.dataDir, "memberclusters", name+".yaml")
}

// waitForMembers waits until every member is joined and healthy, as `fleetctl get members`
// shows them: tests that change members put them back when they end, and the next test
// starts from the whole fleet.
func (s *stack) waitForMembers(t *testing.T) {
	t.Helper()
	poll.Every(t, step, patience, "every member to be joined and healthy", func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "members", "-o", "json")
		if err != nil {
			return fmt.Errorf("fleetctl get members: %v %s", err, errOut)
		}
		var list struct {
			Items []api.MemberCluster `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return fmt.Errorf("fleetctl get members -o json: %v\n%s", err, out)
		}
		ready := map[string]bool{}
		for _, m := range list.Items {
			joined := meta.FindStatusCondition(m.Status.Conditions, string(api.ConditionTypeMemberClusterJoined))
			healthy := meta.FindStatusCondition(m.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy))
			ready[m.Name] = joined != nil && joined.Status == metav1.ConditionTrue && healthy != nil && healthy.Status == metav1.ConditionTrue
		}
		for _, name := range s.memberNames() {
			if !ready[name] {
				return fmt.Errorf("%s is not joined and healthy", name)
			}
		}
		return nil
	})
}

// readTestdata returns a file of testdata.
func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
