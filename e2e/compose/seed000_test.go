package compose_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/e2e/internal/seed000"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The hub's side of seed 000: two namespaces the placement selects by the label app: web-2.
const takeoverHub = `
apiVersion: v1
kind: Namespace
metadata:
  name: web-2
  labels:
    app: web-2
    team: green
---
apiVersion: v1
kind: Namespace
metadata:
  name: work-2
  labels:
    app: web-2
    team: green
`

// TestSeed000TakeoverThroughCompose tells seed 000's story with fleetctl in its container:
// member-2 already runs web-2 as the hub has it and work-2 with team: blue. Never reports
// both, IfNoDiff takes over web-2 only, Always takes over work-2 too, in place.
func TestSeed000TakeoverThroughCompose(t *testing.T) {
	s := stackFor(t)
	for ns, team := range map[string]string{"web-2": "green", "work-2": "blue"} {
		manifest := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    app: web-2\n    team: %s\n", ns, team)
		if out, err := s.kubectl(t, "member-2", manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("namespace %s on member-2: %v\n%s", ns, err, out)
		}
	}
	uid, err := s.kubectl(t, "member-2", "", "get", "namespace", "work-2", "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err)
	}
	s.deleteAtEnd(t, "web-2-crp")

	s.apply(t, takeoverHub+"---"+seed000.Placement(seed000.Never))
	s.expectFailures(t, map[string][]string{"member-2": {"web-2 NotTakenOver " + seed000.NotTakenOverMessage, "work-2 NotTakenOver " + seed000.NotTakenOverMessage}})
	// member-2's failures say nothing of member-1's progress: wait for its objects.
	for _, ns := range []string{"web-2", "work-2"} {
		poll.Every(t, time.Second, 2*time.Minute, fmt.Sprintf("namespace %s placed on member-1, where nothing ran before, with team green", ns), func() error {
			out, err := s.kubectl(t, "member-1", "", "get", "namespace", ns, "-o", "jsonpath={.metadata.labels.team}")
			if err != nil || out != "green" {
				return fmt.Errorf("team %q (%v)", out, err)
			}
			return nil
		})
	}

	s.apply(t, seed000.Placement(seed000.IfNoDiffPartial))
	s.expectFailures(t, map[string][]string{"member-2": {"work-2 FailedToTakeOver " + seed000.FailedToTakeOverMessage}})

	s.apply(t, seed000.Placement(seed000.Always))
	s.expectFailures(t, map[string][]string{})
	s.waitAvailable(t, "web-2-crp", members...)
	if out, err := s.kubectl(t, "member-2", "", "get", "namespace", "work-2", "-o", "jsonpath={.metadata.labels.team} {.metadata.uid}"); err != nil || out != "green "+uid {
		t.Errorf("work-2 on member-2 after Always: %q (%v), want team green and the same uid %s (taken over, not replaced)", out, err, uid)
	}
}

// expectFailures waits until web-2-crp's failedPlacements are want: per member, lines
// "<name> <reason> <message>" in any order (members not named have none).
func (s *stack) expectFailures(t *testing.T, want map[string][]string) {
	t.Helper()
	poll.Every(t, 2*time.Second, 5*time.Minute, fmt.Sprintf("failedPlacements of web-2-crp to be %v", want), func() error {
		crp, err := s.crp(t, "web-2-crp")
		if err != nil {
			return err
		}
		got := map[string][]string{}
		for _, st := range crp.Status.PlacementStatuses {
			for _, f := range st.FailedPlacements {
				got[st.ClusterName] = append(got[st.ClusterName], failureLine(f))
			}
		}
		for _, m := range members {
			g, w := slices.Sorted(slices.Values(got[m])), slices.Sorted(slices.Values(want[m]))
			if !slices.Equal(g, w) {
				return fmt.Errorf("%s: failedPlacements\n  %s\nwant\n  %s", m, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
			}
		}
		return nil
	})
}

func failureLine(f api.FailedResourcePlacement) string {
	return f.Name + " " + f.Condition.Reason + " " + f.Condition.Message
}
