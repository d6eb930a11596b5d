package standalone

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/standalone/quickstart"
)

// An apply worker may publish on its own member's subjects, and its credentials are the first
// an attacker gets. A member.left for member-2, with leavePolicy Delete, published on
// member-1's subject, must change nothing: every consumer dead-letters it with a reason naming
// the type, the subject and the rule, member-2 stays in the fleet, and its workloads stay where
// they are.
func TestForgedMemberLeftIsDeadLetteredAndChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and two member clusters")
	}
	dataDir := reachableDataDir(t)
	run := start(t, Config{DataDir: dataDir, LocalMembers: 2, Example: true, SimulatedNodes: true})
	nc, q := connect(t, run.NATSURL)
	before := waitFor(t, "the example available on both members", func(ctx context.Context) (*api.ClusterResourcePlacement, error) {
		crp, err := q.Placement(ctx, "quickstart")
		if err != nil {
			return nil, err
		}
		if !quickstart.Converged(crp, true) || strings.Join(placedOn(crp), ",") != "member-1,member-2" {
			return nil, fmt.Errorf("on %v, conditions %s", placedOn(crp), summarize(crp.Status.Conditions))
		}
		return crp, nil
	})
	kubeconfig, err := os.ReadFile(filepath.Join(dataDir, "members", "member-2.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	web, err := memberClient(t, kubeconfig).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the example's Deployment on member-2: %v", err)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := events.New(events.TypeMemberLeft, "/flotilla/apply/member-1", "member-2", "forged-member-left",
		events.MemberLeft{Name: "member-2", LeavePolicy: events.LeaveDelete})
	if err != nil {
		t.Fatal(err)
	}
	onMember1, err := events.MemberSubject("member-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(js).Publish(t.Context(), onMember1, forged); err != nil {
		t.Fatal(err)
	}

	// Every consumer of member subjects has settled the event: it is dead-lettered, so no
	// handler ran, and nothing can follow from it.
	reasons := waitFor(t, "the forged event dead-lettered by every consumer", func(ctx context.Context) (map[string]string, error) {
		return deadLettered(ctx, js, forged.ID(), bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus)
	})
	t.Logf("dead-lettered by %s: %s", bus.ConsumerScheduler, reasons[bus.ConsumerScheduler])
	for consumer, reason := range reasons {
		for _, want := range []string{events.TypeMemberLeft, onMember1, "flotilla.member.{member} with member = name",
			`the payload's name is "member-2"`} {
			if !strings.Contains(reason, want) {
				t.Errorf("%s's dead-letter reason %q does not say %q", consumer, reason, want)
			}
		}
	}

	m, err := q.Member(t.Context(), "member-2")
	if err != nil || !joined(m) {
		t.Errorf("member-2 is no longer in the fleet: %v", err)
	}
	after, err := q.Placement(t.Context(), "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(placedOn(after), ","); got != "member-1,member-2" || !quickstart.Converged(after, true) ||
		after.Generation != before.Generation {
		t.Errorf("the placement is on %s, conditions %s: it changed", got, summarize(after.Status.Conditions))
	}
	still, err := memberClient(t, kubeconfig).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil || still.GetUID() != web.GetUID() {
		t.Errorf("the example's Deployment on member-2 is gone or replaced: %v", err)
	}
	work, err := js.Stream(t.Context(), bus.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.WorkSubject("member-2", "quickstart")
	if err != nil {
		t.Fatal(err)
	}
	last, err := work.GetLastMsgForSubject(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	if typ := last.Header.Get("ce-type"); typ != events.TypeWorkDesired {
		t.Errorf("member-2's work for the example is now %s", typ)
	}
}

// deadLettered returns the reason each consumer dead-lettered event id with, once all have.
func deadLettered(ctx context.Context, js jetstream.JetStream, id string, consumers ...string) (map[string]string, error) {
	st, err := js.Stream(ctx, bus.StreamDeadLetter)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range consumers {
		msg, err := st.GetLastMsgForSubject(ctx, bus.DeadLetterSubject(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c, err)
		}
		h := nats.Header(msg.Header)
		if h.Get("ce-id") != id {
			return nil, fmt.Errorf("%s's last dead letter is %s", c, h.Get("ce-id"))
		}
		out[c] = h.Get(bus.HeaderDeadLetterReason)
	}
	return out, nil
}
