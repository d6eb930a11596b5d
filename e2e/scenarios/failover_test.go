package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/standalone"
)

// failoverHeartbeat is the heartbeat period of the failover stack's members: a member
// is down after 1.5 periods of silence, or at the first heartbeat that says its API server
// is unreachable.
const failoverHeartbeat = 5 * time.Second

// failoverStack is a Flotilla of its own on three real members (harness/kube) whose API
// servers the test stops and starts; the shared stack's members stay up for the other tests.
type failoverStack struct {
	*stack
	members *kube.Env
}

func startFailoverStack(t *testing.T) *failoverStack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Flotilla with three member clusters")
	}
	dir, err := os.MkdirTemp("", "flotilla-failover-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	members, err := kube.Start(ctx, kube.Options{N: 3, Dir: dir})
	if err != nil {
		t.Fatalf("start members: %v", err)
	}
	t.Cleanup(func() { members.Stop() })
	kubeconfigs := filepath.Join(dir, "kubeconfigs")
	if err := os.MkdirAll(kubeconfigs, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &stack{dataDir: dir, logPath: filepath.Join(dir, "services.log"), kube: map[string]kubernetes.Interface{}, errc: make(chan error, 1)}
	for _, name := range members.Members() {
		data, err := os.ReadFile(members.Kubeconfig(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(kubeconfigs, name+".kubeconfig"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		rc, err := clientcmd.BuildConfigFromFlags("", members.Kubeconfig(name))
		if err != nil {
			t.Fatal(err)
		}
		if s.kube[name], err = kubernetes.NewForConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan standalone.Endpoints, 1)
	runCtx, stop := context.WithCancel(context.Background())
	s.cancel = stop
	go func() {
		err := standalone.Run(runCtx, standalone.Config{
			DataDir: filepath.Join(dir, "flotilla"), NATSListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
			KubeconfigDir: kubeconfigs, HeartbeatPeriod: failoverHeartbeat, Out: logf,
			Logger: slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Ready:  func(e standalone.Endpoints) { ready <- e },
		})
		logf.Close()
		s.errc <- err
	}()
	select {
	case s.Endpoints = <-ready:
	case err := <-s.errc:
		t.Fatalf("standalone stopped before it was ready: %v\n%s", err, tail(s.logPath, 40))
	case <-time.After(startTimeout):
		t.Fatalf("standalone was not ready after %s\n%s", startTimeout, tail(s.logPath, 40))
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("stop the failover stack: %v", err)
		}
		if t.Failed() {
			t.Logf("the failover stack's data dir is kept for a look: %s (services' log: %s)", dir, s.logPath)
			return
		}
		os.RemoveAll(dir)
	})
	s.waitForMembers(t)
	return &failoverStack{stack: s, members: members}
}

// failoverPlacement is a namespace with a ConfigMap and a PickN 2 placement of it that
// fails over after 20s, and fails back after failback when that is not empty.
func failoverPlacement(name, failback string) string {
	annotations := `    flotilla.dev/failover-after: "20s"`
	if failback != "" {
		annotations += fmt.Sprintf("\n    flotilla.dev/failback-after: %q", failback)
	}
	return namespaceWithSettings(name) + fmt.Sprintf(`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: %[1]s
  annotations:
%[2]s
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: %[1]s}
  policy:
    placementType: PickN
    numberOfClusters: 2
`, name, annotations)
}

// holds reports whether member holds the placement's ConfigMap (an error: it could not tell).
func (s *stack) holds(ctx context.Context, member, namespace string) (bool, error) {
	_, err := s.member(member).CoreV1().ConfigMaps(namespace).Get(ctx, "settings", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// returnedAt is when the placement's history says the scheduler found cluster back after
// it was lost; the zero time when it does not say so.
func (s *stack) returnedAt(t *testing.T, placement, cluster string) time.Time {
	t.Helper()
	var h events.PlacementHistory
	if err := json.Unmarshal([]byte(s.run(t, "history", "crp", placement, "-o", "json")), &h); err != nil {
		t.Fatalf("decode the history of %s: %v", placement, err)
	}
	for _, f := range h.Failovers {
		if f.Kind == "returned" && f.From == cluster {
			return f.At
		}
	}
	return time.Time{}
}

// failoverCondition is the Failover condition of cluster in the placement's status, or nil.
func failoverCondition(crp *api.ClusterResourcePlacement, cluster string) *metav1.Condition {
	st := clusterStatus(crp, cluster)
	if st == nil {
		return nil
	}
	return meta.FindStatusCondition(st.Conditions, api.FailoverConditionType)
}

// availableOn says what is wrong unless the placement is Available on exactly clusters and
// its Failover condition on cluster has reason.
func availableOn(clusters []string, cluster, reason string) func(*api.ClusterResourcePlacement) error {
	return func(crp *api.ClusterResourcePlacement) error {
		if got := scheduledClusters(crp); !slices.Equal(got, clusters) {
			return fmt.Errorf("scheduled on %v, want %v", got, clusters)
		}
		for _, c := range clusters {
			st := clusterStatus(crp, c)
			if cond := meta.FindStatusCondition(st.Conditions, string(api.PerClusterAvailableConditionType)); cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("not available on %s yet (%s)", c, summarize(st.Conditions))
			}
		}
		if c := failoverCondition(crp, cluster); c == nil || c.Reason != reason {
			return fmt.Errorf("the Failover condition of %s is %+v, want %s", cluster, c, reason)
		}
		return nil
	}
}

// TestFailoverMovesALostMemberAndRemovesItsCopyOnlyOnceItIsBack: a PickN 2 placement
// loses a member (its API server is stopped), moves to the third member within the grace
// period plus seconds and keeps serving on the other; the lost member's copy stays until the
// member is back, and goes then. A second placement with failback on moves back to the
// original member once it has been healthy for the failback period.
func TestFailoverMovesALostMemberAndRemovesItsCopyOnlyOnceItIsBack(t *testing.T) {
	s := startFailoverStack(t)
	ctx := t.Context()

	s.apply(t, failoverPlacement("failover-sticky", ""))
	crp := s.converged(t, "failover-sticky", 1)
	if got := scheduledClusters(crp); !slices.Equal(got, []string{"member-1", "member-2"}) {
		t.Fatalf("failover-sticky is placed on %v, want [member-1 member-2]", got)
	}

	// member-1 is lost: the placement moves to member-3, and member-2 keeps serving.
	lostAt := time.Now()
	if err := s.members.StopAPIServer("member-1"); err != nil {
		t.Fatal(err)
	}
	crp = s.placementWhen(t, "failover-sticky", "failover-sticky to fail over to member-3",
		availableOn([]string{"member-2", "member-3"}, "member-3", api.FailedOverReason))
	t.Logf("FIGURE time to failover (API server stopped to available on the replacement, grace 20s, heartbeat %s): %s",
		failoverHeartbeat, time.Since(lostAt).Round(time.Second))
	if c := failoverCondition(crp, "member-1"); c == nil || c.Reason != api.ClusterLostReason {
		t.Errorf("member-1's Failover condition %+v, want %s", c, api.ClusterLostReason)
	}
	if ok, err := s.holds(ctx, "member-2", "failover-sticky"); err != nil || !ok {
		t.Errorf("member-2 stopped serving during the failover: holds %v, %v", ok, err)
	}

	// member-1 comes back with its copy, which goes only now.
	backAt := time.Now()
	if err := s.members.StartAPIServer(ctx, "member-1"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.holds(ctx, "member-1", "failover-sticky"); err != nil || !ok {
		// On a loaded machine the API server answers the worker's heartbeat before
		// StartAPIServer has seen it ready, and the copy can be gone already: right, if the
		// scheduler found member-1 back only after the API server was started again.
		if at := s.returnedAt(t, "failover-sticky", "member-1"); at.Before(backAt) {
			t.Fatalf("member-1's copy is gone when it comes back (holds %v, %v), and the scheduler found it back at %v, before its API server was started at %v: it was removed while the member was lost",
				ok, err, at, backAt)
		}
	}
	poll.Every(t, step, patience, "member-1's copy of failover-sticky to be removed", func() error {
		ok, err := s.holds(ctx, "member-1", "failover-sticky")
		if err == nil && ok {
			return fmt.Errorf("member-1 still holds it")
		}
		return err
	})
	s.placementWhen(t, "failover-sticky", "failover-sticky to stay on member-3 (failback is off)",
		availableOn([]string{"member-2", "member-3"}, "member-3", api.FailedOverReason))
	history := s.run(t, "history", "crp", "failover-sticky")
	for _, want := range []string{"failover   member-1", "returned   member-1"} {
		if !strings.Contains(strings.Join(strings.Fields(history), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("fleetctl history crp failover-sticky does not show %q:\n%s", want, history)
		}
	}
	s.waitForMembers(t)

	t.Run("failback", func(t *testing.T) {
		s.apply(t, failoverPlacement("failover-back", "30s"))
		crp := s.converged(t, "failover-back", 1)
		first := scheduledClusters(crp)
		if len(first) != 2 {
			t.Fatalf("failover-back is placed on %v", first)
		}
		lost := first[0]
		if err := s.members.StopAPIServer(lost); err != nil {
			t.Fatal(err)
		}
		crp = s.placementWhen(t, "failover-back", "failover-back to fail over from "+lost, func(crp *api.ClusterResourcePlacement) error {
			if got := scheduledClusters(crp); slices.Contains(got, lost) || len(got) != 2 {
				return fmt.Errorf("scheduled on %v", got)
			}
			return nil
		})
		replacement := ""
		for _, c := range scheduledClusters(crp) {
			if !slices.Contains(first, c) {
				replacement = c
			}
		}
		if err := s.members.StartAPIServer(ctx, lost); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		s.placementWhen(t, "failover-back", "failover-back to fail back to "+lost, availableOn(first, lost, api.FailedBackReason))
		t.Logf("FIGURE time to failback (API server back to available on it again, failback-after 30s): %s", time.Since(back).Round(time.Second))
		poll.Every(t, step, patience, replacement+"'s copy of failover-back to be removed", func() error {
			ok, err := s.holds(ctx, replacement, "failover-back")
			if err == nil && ok {
				return fmt.Errorf("%s still holds it", replacement)
			}
			return err
		})
	})
}
