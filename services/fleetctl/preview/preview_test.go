package preview

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// serve answers subject with answer's result until the test ends, as a service
// would (the scheduler, the rollout and one member's worker are played here:
// the services' own answers are tested beside them).
func serve[T any](t *testing.T, nc *nats.Conn, subject string, accept func(*nats.Msg) error, answer func(data []byte) T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	subs := nc.NumSubscriptions()
	go func() {
		defer close(done)
		_ = reply.Serve(ctx, nc, subject, "", slog.New(slog.DiscardHandler), accept, func(_ context.Context, m *nats.Msg, w io.Writer) error {
			return json.NewEncoder(w).Encode(events.QueryReply[T]{Result: answer(m.Data)})
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	// Serve subscribes in its goroutine: wait for that, then for the server to
	// have it, or a request may find no responder.
	poll.Until(t, 5*time.Second, "the responder on "+subject, func() error {
		if nc.NumSubscriptions() <= subs {
			return errors.New("not subscribed yet")
		}
		return nil
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A member that does not answer in time is named, and the others' answers are kept.
func TestRunNamesTheMembersThatDoNotAnswer(t *testing.T) {
	_, nc := natsserver.StartT(t)
	serve(t, nc, events.PreviewSchedulingSubject, nil, func([]byte) events.SchedulingPreview {
		return events.SchedulingPreview{Placement: "web", Fulfilled: true,
			Chosen: []events.PreviewChosen{{Cluster: "m1", Action: "added"}, {Cluster: "m2", Action: "added"}}}
	})
	serve(t, nc, events.PreviewRolloutSubject, nil, func(data []byte) events.RolloutPreview {
		var req events.RolloutPreviewRequest
		_ = json.Unmarshal(data, &req)
		out := events.RolloutPreview{Placement: "web"}
		for _, c := range req.Clusters {
			out.Clusters = append(out.Clusters, events.ClusterRender{Cluster: c,
				Manifests: []json.RawMessage{json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web"}}`)}})
		}
		return out
	})
	m1, _ := events.PreviewMemberSubject("m1")
	serve(t, nc, m1, func(m *nats.Msg) error { return events.CheckPreviewReply("m1", m.Reply) }, func(data []byte) events.MemberPreview {
		req, err := events.DecodeMemberPreviewRequest("m1", data)
		if err != nil {
			t.Errorf("m1 was asked %s: %v", data, err)
			return events.MemberPreview{}
		}
		return events.MemberPreview{Cluster: "m1", Objects: []events.ObjectPreview{{
			ResourceIdentifier: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web"}, Outcome: events.PreviewCreate}}[:len(req.Manifests)]}
	})
	// m2's worker takes the request and never answers.
	m2, _ := events.PreviewMemberSubject("m2")
	if _, err := nc.Subscribe(m2, func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}

	crp := api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	res, err := Run(t.Context(), nc, Input{Placements: []api.ClusterResourcePlacement{crp}}, Options{MemberTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Partial, []string{"m2"}) {
		t.Errorf("partial %v, want m2", res.Partial)
	}
	got := res.Placements[0].Members
	if len(got) != 2 || got[0].Cluster != "m1" || len(got[0].Objects) != 1 || got[0].Objects[0].Outcome != events.PreviewCreate {
		t.Errorf("m1's answer: %+v", got)
	}
	if len(got) == 2 && (!got[1].NoAnswer || got[1].Error != "the apply worker of m2 did not answer within 500ms") {
		t.Errorf("m2: %+v, want no answer within 500ms", got[1])
	}
}

// Without a scheduler to answer, the preview fails saying so.
func TestRunWithoutTheScheduler(t *testing.T) {
	_, nc := natsserver.StartT(t)
	_, err := Run(t.Context(), nc, Input{Placements: []api.ClusterResourcePlacement{{ObjectMeta: metav1.ObjectMeta{Name: "web"}}}},
		Options{HubTimeout: 200 * time.Millisecond})
	if !errors.Is(err, reply.ErrNoAnswer) || !strings.Contains(err.Error(), "preview web: the scheduler: ") {
		t.Errorf("a preview without a scheduler: %v", err)
	}
}
