package status_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// TestQuarantinedWorkShowsInTheClusterStatus: the outbox sets aside member-1's new work
// (too large for the bus); member-1's WorkSynchronized turns False with the outbox's reason,
// and turns back once member-1 reports on newer work.
func TestQuarantinedWorkShowsInTheClusterStatus(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	story(f)
	workSynchronized := func(cluster string) (*metav1.Condition, error) {
		r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
		for _, ps := range r.Result.Status.PlacementStatuses {
			if ps.ClusterName == cluster {
				if c := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterWorkSynchronizedConditionType)); c != nil {
					return c, nil
				}
			}
		}
		return nil, fmt.Errorf("%s has no WorkSynchronized condition", cluster)
	}
	poll.Until(t, 20*time.Second, "member-1 applied", func() error {
		c, err := workSynchronized("member-1")
		if err == nil && c.Status != metav1.ConditionTrue {
			err = fmt.Errorf("WorkSynchronized is %s", c.Status)
		}
		return err
	})

	reason := "event work-1 of type io.flotilla.work.desired.v1 for flotilla.work.member-1.web-2-crp is 2000000 bytes, over the bus limit of 1048576 bytes"
	workSubject := subject(events.WorkSubject("member-1", "web-2-crp"))
	f.publish(subject(events.OutboxSubject("web-2-crp")), f.event(events.TypeOutboxQuarantined, "quarantine-1", t0.Add(30*time.Second),
		events.OutboxQuarantined{EventID: "work-1", Type: events.TypeWorkDesired, Subject: workSubject, Placement: "web-2-crp",
			Cluster: "member-1", Size: 2000000, Limit: 1048576, Reason: reason, QuarantinedAt: t0.Add(30 * time.Second)}))
	poll.Until(t, 20*time.Second, "member-1's work shown as set aside", func() error {
		c, err := workSynchronized("member-1")
		switch {
		case err != nil:
			return err
		case c.Status != metav1.ConditionFalse || c.Reason != api.WorkNotSynchronizedYetReason:
			return fmt.Errorf("WorkSynchronized is %s (%s)", c.Status, c.Reason)
		case !strings.HasPrefix(c.Message, fold.WorkQuarantinedMessage) || !strings.Contains(c.Message, reason):
			return fmt.Errorf("message %q does not give the reason", c.Message)
		}
		return nil
	})
	if c, _ := workSynchronized("member-2"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("member-2's work was not set aside, yet its WorkSynchronized is %v", c)
	}

	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	newer := t0.Add(40 * time.Second)
	f.publish(subject(events.WorkStatusSubject("member-1", "web-2-crp")), f.event(events.TypeWorkReported, "report-newer", newer,
		events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", ResourceIndex: 1, Generation: 1, ObservedAt: newer,
			Manifests: []events.ManifestResult{{Resource: ns,
				Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: api.ManifestAvailableReason}}},
			Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
			Available: events.Condition{Status: "True", Reason: api.AvailableReason}}))
	poll.Until(t, 20*time.Second, "the set-aside work forgotten once member-1 reports newer work", func() error {
		c, err := workSynchronized("member-1")
		if err == nil && strings.HasPrefix(c.Message, fold.WorkQuarantinedMessage) {
			err = fmt.Errorf("still %s: %s", c.Status, c.Message)
		}
		return err
	})
	var rows int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from status_quarantine`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("status_quarantine holds %d rows (%v), want none", rows, err)
	}
}
