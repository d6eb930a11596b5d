package compose_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

var members = []string{"member-1", "member-2"}

// app is a namespace of the hub holding a ConfigMap whose greeting the tests change, and a
// Deployment the members' simulated nodes make available.
func app(ns, greeting string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
  labels:
    app: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  greeting: %[2]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx:1.27
`, ns, greeting)
}

// pickAll places namespace ns on every member, all at once.
func pickAll(ns string) string {
	return fmt.Sprintf(`
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: %[1]s
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: %[1]s
  policy:
    placementType: PickAll
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 100%%
      unavailablePeriodSeconds: 1
`, ns)
}

// waitGreeting waits until every member has the ConfigMap of ns with greeting.
func (s *stack) waitGreeting(t testing.TB, ns, greeting string) {
	t.Helper()
	poll.Every(t, 2*time.Second, 5*time.Minute, "greeting "+greeting+" on every member", func() error {
		for _, m := range members {
			out, err := s.kubectl(t, m, "", "get", "configmap", "settings", "-n", ns, "-o", "jsonpath={.data.greeting}")
			if err != nil {
				return err
			}
			if out != greeting {
				return fmt.Errorf("%s has greeting %q", m, out)
			}
		}
		return nil
	})
}

// members lists the fleet's members as fleetctl get members -o json shows them.
func (s *stack) members(t testing.TB) ([]api.MemberCluster, string, error) {
	out, err := s.fleetctl(t, "", "get", "members", "-o", "json")
	if err != nil {
		return nil, out, err
	}
	var list struct {
		Items []api.MemberCluster `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, out, fmt.Errorf("fleetctl get members -o json: %w\n%s", err, out)
	}
	return list.Items, out, nil
}

// waitMemberHealth waits until member's Healthy condition has reason.
func (s *stack) waitMemberHealth(t testing.TB, member, reason string) {
	t.Helper()
	poll.Every(t, 2*time.Second, 3*time.Minute, member+" Healthy with reason "+reason, func() error {
		list, _, err := s.members(t)
		if err != nil {
			return err
		}
		for _, mc := range list {
			if mc.Name == member {
				c := meta.FindStatusCondition(mc.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy))
				if c == nil || c.Reason != reason {
					return fmt.Errorf("Healthy is %+v", c)
				}
				return nil
			}
		}
		return fmt.Errorf("no member %s", member)
	})
}

func TestMembersJoinAndAPlacementBecomesAvailable(t *testing.T) {
	s := stackFor(t)
	list, out, err := s.members(t)
	if err != nil {
		t.Fatal(err)
	}
	joined := map[string]bool{}
	for _, mc := range list {
		joined[mc.Name] = meta.IsStatusConditionTrue(mc.Status.Conditions, string(api.ConditionTypeMemberClusterJoined))
	}
	for _, m := range members {
		if !joined[m] {
			t.Errorf("fleetctl get members: %s is not joined (%v)\n%s", m, joined, out)
		}
	}

	s.deleteAtEnd(t, "compose-web")
	s.apply(t, app("compose-web", "hello")+"---"+pickAll("compose-web"))
	s.waitAvailable(t, "compose-web", members...)
	for _, m := range members {
		out, err := s.kubectl(t, m, "", "get", "deployment", "web", "-n", "compose-web", "-o", "jsonpath={.status.availableReplicas}")
		if err != nil || out != "2" {
			t.Errorf("%s: deployment web has %q available replicas (%v), want 2", m, out, err)
		}
	}
}

// TestKilledServicesRecoverMidRollout kills each container of the stack (docker kill) right
// after a change was published, keeps it down while the change waits, then starts it again:
// the change reaches every member and the placement is available again.
func TestKilledServicesRecoverMidRollout(t *testing.T) {
	s := stackFor(t)
	const ns = "compose-kill"
	s.deleteAtEnd(t, ns)
	s.apply(t, app(ns, "before")+"---"+pickAll(ns))
	s.waitAvailable(t, ns, members...)
	for _, svc := range []string{"scheduler", "rollout", "status", "apply-member-1", "apply-member-2", "nats", "postgres"} {
		t.Run(svc, func(t *testing.T) {
			greeting := "after-" + svc
			if svc == "nats" {
				// With NATS down nothing can be published: kill it first, and publish once it is back.
				s.mustCompose(t, "kill", svc)
				s.mustCompose(t, "up", "-d", "--no-build", "--wait", svc)
				s.apply(t, app(ns, greeting))
			} else {
				s.apply(t, app(ns, greeting))
				s.mustCompose(t, "kill", svc)
				s.mustCompose(t, "up", "-d", "--no-build", "--wait", svc)
			}
			s.waitGreeting(t, ns, greeting)
			s.waitAvailable(t, ns, members...)
		})
	}
	// Every service healthy again, none left exited. A service that failed its checks
	// while another was down shows so until its next check: poll.
	poll.Every(t, 2*time.Second, 3*time.Minute, "every service healthy after the kills", func() error {
		out := s.mustCompose(t, "ps", "--format", "{{.Service}} {{.Health}}")
		var sick []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[1] != "healthy" {
				sick = append(sick, f[0]+" is "+f[1])
			}
		}
		if len(sick) > 0 {
			return errors.New(strings.Join(sick, ", "))
		}
		return nil
	})
}

// TestMemberCutOffAndReconnected takes member-2's apply worker off the stack's network: the
// placement's change cannot reach member-2 while member-1 gets it, and the status says why
// (member-2's heartbeats missed); once connected again, member-2 is healthy and converges.
func TestMemberCutOffAndReconnected(t *testing.T) {
	s := stackFor(t)
	const ns = "compose-cut"
	s.deleteAtEnd(t, ns)
	s.apply(t, app(ns, "before")+"---"+pickAll(ns))
	s.waitAvailable(t, ns, members...)

	id := strings.TrimSpace(s.mustCompose(t, "ps", "-q", "apply-member-2"))
	network := s.project + "_default"
	docker(t, "network", "disconnect", network, id)
	connected := false
	t.Cleanup(func() {
		if !connected {
			_, _ = dockerErr("network", "connect", network, id)
		}
	})
	s.apply(t, app(ns, "while-cut"))
	poll.Every(t, 2*time.Second, 5*time.Minute, "member-1 to get the change", func() error {
		out, err := s.kubectl(t, "member-1", "", "get", "configmap", "settings", "-n", ns, "-o", "jsonpath={.data.greeting}")
		if err == nil && out != "while-cut" {
			err = fmt.Errorf("member-1 has %q", out)
		}
		return err
	})
	if out, err := s.kubectl(t, "member-2", "", "get", "configmap", "settings", "-n", ns, "-o", "jsonpath={.data.greeting}"); err != nil || out != "before" {
		t.Errorf("member-2, cut off from the stack, has greeting %q (%v); want the old one", out, err)
	}
	// The status says why: member-2's heartbeats stopped.
	s.waitMemberHealth(t, "member-2", "MemberClusterHeartbeatMissed")
	// Meanwhile the placement does not claim member-2 has the change.
	crp, err := s.crp(t, ns)
	if err != nil {
		t.Fatal(err)
	}
	if st := placementStatus(crp, "member-2"); st != nil && st.ObservedResourceIndex == placementStatus(crp, "member-1").ObservedResourceIndex {
		if c := meta.FindStatusCondition(st.Conditions, string(api.PerClusterAvailableConditionType)); c != nil && c.Status == "True" {
			t.Errorf("member-2 is cut off but reported available at the new resource index %s", st.ObservedResourceIndex)
		}
	}

	docker(t, "network", "connect", network, id)
	connected = true
	s.waitMemberHealth(t, "member-2", "MemberClusterHealthy")
	s.waitGreeting(t, ns, "while-cut")
	s.waitAvailable(t, ns, members...)
}

// TestDownAndUpLoseNothing takes the whole stack down (containers removed, named volumes
// kept) and up again: the placement, its status and the members are all still there, and a
// change made after converges.
func TestDownAndUpLoseNothing(t *testing.T) {
	s := stackFor(t)
	const ns = "compose-down"
	s.deleteAtEnd(t, ns)
	s.apply(t, app(ns, "before-down")+"---"+pickAll(ns))
	s.waitAvailable(t, ns, members...)

	s.mustCompose(t, "down", "--timeout", "20")
	if out := strings.TrimSpace(s.mustCompose(t, "ps", "-q")); out != "" {
		t.Fatalf("containers left after down: %s", out)
	}
	c := s.cmd("bash", "hack/compose.sh", "up")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("up again: %v\n%s", err, out)
	}
	s.waitAvailable(t, ns, members...)
	s.waitGreeting(t, ns, "before-down")
	s.apply(t, app(ns, "after-up"))
	s.waitGreeting(t, ns, "after-up")
}
