package scenarios

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/seeds"
)

// The seeds' commands, verbatim. The reader runs them with the hub cluster as kubectl's
// cluster (KUBECONFIG), in a directory holding web-2-crp.yaml.
const (
	seedApply = `kubectl apply -f web-2-crp.yaml`
	seedQuery = `kubectl get clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io web-2-crp -o jsonpath='{.status.placementStatuses}' \
    | jq '[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})'`
)

// TestSeed000OnTheHub plays seeds 000 and 002 as their readers do, on a hub cluster: every
// command of the seeds runs verbatim with kubectl (the hub is KUBECONFIG) and the seeds' jq,
// and shows the entries the seeds document, field for field. Then the story ends as the seeds
// advise (whenToTakeOver: Always), and kubectl wait sees the placement available.
//
// As in TestSeed000TakeoverStory, member-2 runs web-2 as the hub has it and work-2 with
// team: blue; member-3 runs web-2 with team: blue.
func TestSeed000OnTheHub(t *testing.T) {
	s := fleetFor(t)
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the seeds pipe kubectl into jq, which is not installed")
	}
	for _, seed := range []struct{ name, never, ifNoDiff string }{
		{"000", "000-1.yaml", "000-2.yaml"},
		{"002", "002-1.reindented.yaml", "002-2.reindented.yaml"},
	} {
		t.Run(seed.name, func(t *testing.T) {
			s.playTakeoverSeedOnHub(t, seeds.Read(t, seed.never), seeds.Read(t, seed.ifNoDiff))
		})
	}
}

func (s *stack) playTakeoverSeedOnHub(t *testing.T, never, ifNoDiff string) {
	existing := map[string]map[string]string{"member-2": {"web-2": "green", "work-2": "blue"}, "member-3": {"web-2": "blue"}}
	for member, namespaces := range existing {
		for ns, team := range namespaces {
			if _, err := s.member(member).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: ns, Labels: map[string]string{"app": "web-2", "team": team}}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create namespace %s on %s: %v", ns, member, err)
			}
		}
	}
	t.Cleanup(func() { s.cleanUpHubSeed(t) })
	dir := t.TempDir()
	// The workload on the hub first, as the seed says: "deploying the workload manifests onto
	// your Fleet Manager hub cluster".
	s.onHub(t, takeoverHub, "apply", "-f", "-")

	// Step 1: check for conflicting workloads.
	t.Logf("%s\n%s", seedApply, s.seedCommand(t, dir, never, seedApply))
	notTakenOver := seedSample(t, "000-3.json")
	s.expectSeedOutput(t, dir, map[string][]string{"member-2": {"web-2", "work-2"}, "member-3": {"web-2"}}, notTakenOver)

	// Step 2: take over what does not differ.
	t.Logf("%s\n%s", seedApply, s.seedCommand(t, dir, ifNoDiff, seedApply))
	failedToTakeOver := seedSample(t, "000-4.json")
	s.expectSeedOutput(t, dir, map[string][]string{"member-2": {"work-2"}, "member-3": {"web-2"}}, failedToTakeOver)

	// The seed's last advice: overwrite with whenToTakeOver Always; then the placement is
	// available everywhere, and kubectl wait says so.
	always := strings.Replace(strings.ReplaceAll(ifNoDiff, "\u00a0", " "), "whenToTakeOver: IfNoDiff", "whenToTakeOver: Always", 1)
	s.seedCommand(t, dir, always, seedApply)
	out := s.seedCommand(t, dir, "", "kubectl wait crp/web-2-crp --for=condition=ClusterResourcePlacementAvailable --timeout=10m")
	t.Logf("kubectl wait: %s", strings.TrimSpace(out))
	if got := s.seedCommand(t, dir, "", seedQuery); strings.TrimSpace(got) != "[]" {
		t.Errorf("after whenToTakeOver Always the seed's query shows failures:\n%s", got)
	}
	table := s.seedCommand(t, dir, "", "kubectl get crp web-2-crp")
	t.Logf("kubectl get crp web-2-crp:\n%s", table)
	if fields := strings.Fields(table); len(fields) < 14 || fields[7] != "web-2-crp" || fields[8] != "3" || fields[9] != "True" || fields[10] != "3" || fields[11] != "True" || fields[12] != "3" {
		t.Errorf("kubectl get crp: want web-2-crp at generation 3, scheduled and available at 3:\n%s", table)
	}
}

// seedCommand writes web-2-crp.yaml (when manifest is not empty; non-breaking spaces the web
// page put in the English seed's block become spaces, as an editor shows them) and runs a
// seed's command line in bash, with the hub as kubectl's cluster.
func (s *stack) seedCommand(t *testing.T, dir, manifest, command string) string {
	t.Helper()
	out, err := s.runSeedCommand(t.Context(), dir, manifest, command)
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return out
}

func (s *stack) runSeedCommand(ctx context.Context, dir, manifest, command string) (string, error) {
	if manifest != "" {
		if err := os.WriteFile(filepath.Join(dir, "web-2-crp.yaml"), []byte(strings.ReplaceAll(manifest, "\u00a0", " ")), 0o644); err != nil {
			return "", err
		}
	}
	bin, err := kube.BinDir()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.HubKubeconfig, "PATH="+bin+":"+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// seedSample is a documented output of the seed: one cluster's entry, its first failed
// placement as JSON.
type seedEntry struct {
	ClusterName      string `json:"clusterName"`
	FailedPlacements []any  `json:"failedPlacements"`
}

func seedSample(t *testing.T, name string) seedEntry {
	t.Helper()
	var e seedEntry
	if err := json.Unmarshal([]byte(seeds.Read(t, name)), &e); err != nil || len(e.FailedPlacements) == 0 {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

// expectSeedOutput runs the seed's query until it lists, per cluster, failed placements of
// the namespaces want names, each exactly as the seed's sample entry shows one (its
// lastTransitionTime "..." standing for a time), and the sample's own entry among them.
func (s *stack) expectSeedOutput(t *testing.T, dir string, want map[string][]string, sample seedEntry) {
	t.Helper()
	poll.Every(t, step, patience, "the seed's query to show the documented failures", func() error {
		out, err := s.runSeedCommand(t.Context(), dir, "", seedQuery)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return fmt.Errorf("jq printed what is not a JSON list: %v\n%s", err, out)
		}
		byCluster := map[string][]any{}
		for _, entry := range got {
			if len(entry) != 2 {
				return fmt.Errorf("an entry has keys other than clusterName and failedPlacements: %v", entry)
			}
			byCluster[fmt.Sprint(entry["clusterName"])], _ = entry["failedPlacements"].([]any)
		}
		if len(byCluster) != len(want) {
			return fmt.Errorf("clusters with failures: %v, want %v\n%s", keys(byCluster), want, out)
		}
		if !slices.Contains(want[sample.ClusterName], fmt.Sprint(asJSON(sample.FailedPlacements[0])["name"])) {
			return fmt.Errorf("the test expects no failure for the seed's own sample %v", sample)
		}
		for cluster, names := range want {
			failed := byCluster[cluster]
			if len(failed) != len(names) {
				return fmt.Errorf("%s lists %d failed placement(s), want %v\n%s", cluster, len(failed), names, out)
			}
			for i, name := range names {
				f := failed[i].(map[string]any)
				if cond, ok := f["condition"].(map[string]any); ok && cond["lastTransitionTime"] != nil {
					cond["lastTransitionTime"] = "..." // as the seed writes a time
				}
				wantEntry := asJSON(sample.FailedPlacements[0])
				wantEntry["name"] = name
				if !reflect.DeepEqual(f, wantEntry) {
					return fmt.Errorf("%s's failed placement %d is\n%v\nwant, as the seed shows it,\n%v", cluster, i, f, wantEntry)
				}
			}
		}
		t.Logf("%s\n%s", seedQuery, out)
		return nil
	})
}

// asJSON is v as the generic JSON jq prints, decoded.
func asJSON(v any) map[string]any {
	data, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// cleanUpHubSeed deletes the placement and the workload from the hub, as a user would, and
// waits until the members are as they were before the seed: no web-2 or work-2.
func (s *stack) cleanUpHubSeed(t *testing.T) {
	ctx := context.Background() // the test's context ends before its cleanup
	if out, err := s.kubectl(ctx, "", "delete", "crp", "web-2-crp", "--ignore-not-found"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	if out, errOut, err := s.fleetctl(ctx, "", "wait", "crp", "web-2-crp", "--for=delete", "--timeout="+patience.String()); err != nil {
		t.Errorf("fleetctl wait --for=delete: %v\n%s%s", err, out, errOut)
	}
	if out, err := s.kubectl(ctx, "", "delete", "namespace", "web-2", "work-2", "--ignore-not-found", "--timeout=5m"); err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	// The hub lets the namespaces go: their deletion is on the bus, and fleetctl may place
	// namespaces of these names again.
	for _, ns := range []string{"web-2", "work-2"} {
		subject := "flotilla.hub.core.Namespace.-." + ns
		if err := waitUntil(patience, func() error { return s.lastEventIs(subject, events.TypeHubResourceDeleted) }); err != nil {
			t.Errorf("the hub's deletion of namespace %s: %v", ns, err)
		}
	}
	for _, member := range s.memberNames() {
		for _, ns := range []string{"web-2", "work-2"} {
			err := s.member(member).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s on %s: %v", ns, member, err)
			}
		}
	}
	err := waitUntil(patience, func() error {
		for _, member := range s.memberNames() {
			for _, ns := range []string{"web-2", "work-2"} {
				if _, err := s.member(member).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s on %s: %v", ns, member, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("web-2 and work-2 to be gone from every member: %v", err)
	}
}

// waitUntil is poll.Every for cleanups, which run after the test's context ended.
func waitUntil(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(step)
	}
}

// lastEventIs says whether the last event on subject is of type typ.
func (s *stack) lastEventIs(subject, typ string) error {
	nc, err := nats.Connect(s.NATSURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	stream, err := js.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		return err
	}
	last, err := stream.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		return err
	}
	if got := last.Header.Get("ce-type"); got != typ {
		return fmt.Errorf("it is %s", got)
	}
	return nil
}
