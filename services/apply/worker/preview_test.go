package worker_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
)

// A worker answers its member's preview requests on its own preview inbox, with what the
// apply would do there (here, to a placement it applied already: no change, and an
// update with its diff); a request for another cluster, or whose answer would go
// elsewhere, is not answered.
func TestWorkerAnswersPreviewsOnItsOwnInbox(t *testing.T) {
	f := newFleet(t)
	f.start(member, nil)
	ns := name(t, "ns")
	w := work(t, member, "web", api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "settings", "1"))
	f.desire(w)
	f.waitReport(member, "web", "applied", func(r *events.WorkReported) bool { return r.Applied.Status == "True" })

	subject, _ := events.PreviewMemberSubject(member)
	prefix, _ := events.PreviewReplyPrefix(member)
	changed := work(t, member, "web", api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "settings", "2"))
	ask := func(cluster, replyTo string, timeout time.Duration) (events.MemberPreview, error) {
		req, _ := json.Marshal(events.MemberPreviewRequest{Cluster: cluster, Placement: "web", Manifests: changed.Manifests})
		return reply.Call[events.MemberPreview](t.Context(), f.nc, subject, replyTo, req, timeout)
	}
	got, err := ask(member, prefix+".t1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]string{}
	for _, o := range got.Objects {
		outcomes[o.Kind] = o.Outcome
	}
	if outcomes["Namespace"] != events.PreviewNoChange || outcomes["ConfigMap"] != events.PreviewUpdate {
		t.Errorf("preview %s", dump(got))
	}
	if _, err := ask("member-2", prefix+".t2", 30*time.Second); err == nil {
		t.Error("a request for member-2 was answered by member-1's worker")
	}
	if _, err := ask(member, f.nc.NewInbox(), 2*time.Second); !errors.Is(err, reply.ErrNoAnswer) {
		t.Errorf("an answer went to the requester's own inbox: %v", err)
	}
}
