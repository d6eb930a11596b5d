package query

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
)

// serve answers the placement.get endpoint with h, as a status service would.
func serve(t *testing.T, nc *nats.Conn, h micro.HandlerFunc) {
	t.Helper()
	svc, err := micro.AddService(nc, micro.Config{Name: events.QueryService, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	if err := svc.AddEndpoint("placement-get", h, micro.WithEndpointSubject(events.QuerySubjectPrefix+events.QueryGetPlacement)); err != nil {
		t.Fatal(err)
	}
}

func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handler  micro.HandlerFunc
		wantName string
		wantErr  string
		notFound bool
	}{
		{
			name: "result",
			handler: func(r micro.Request) {
				var q events.NameQuery
				_ = json.Unmarshal(r.Data(), &q)
				b, _ := json.Marshal(events.QueryReply[api.ClusterResourcePlacement]{Result: api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: q.Name}}})
				_ = r.Respond(b)
			},
			wantName: "web",
		},
		{
			name: "not found in the reply",
			handler: func(r micro.Request) {
				b, _ := json.Marshal(events.QueryReply[any]{Error: `placement "web" not found`, NotFound: true})
				_ = r.Error("404", "not found", b)
			},
			wantErr: `placement "web" not found`, notFound: true,
		},
		{
			name: "not found by code only",
			handler: func(r micro.Request) {
				b, _ := json.Marshal(events.QueryReply[any]{Error: "no such placement"})
				_ = r.Error("404", "no such placement", b)
			},
			wantErr: "no such placement", notFound: true,
		},
		{
			name:    "error header without a body",
			handler: func(r micro.Request) { _ = r.Error("500", "database unavailable", nil) },
			wantErr: "database unavailable",
		},
		{
			name:    "an answer that is not JSON",
			handler: func(r micro.Request) { _ = r.Respond([]byte("hello")) },
			wantErr: "query placement.get: cannot read the status service's answer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, nc := natsserver.StartT(t)
			serve(t, nc, tc.handler)
			p, err := New(nc).Placement(t.Context(), "web")
			if tc.wantErr == "" {
				if err != nil || p.Name != tc.wantName {
					t.Fatalf("Placement = %+v, %v", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNotFound); got != tc.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", got, tc.notFound)
			}
		})
	}
}

func TestNoResponder(t *testing.T) {
	_, nc := natsserver.StartT(t)
	_, err := New(nc).Placements(t.Context(), "")
	if !errors.Is(err, ErrNoStatusService) {
		t.Fatalf("error = %v, want ErrNoStatusService", err)
	}
	if !strings.Contains(err.Error(), "nothing answers on flotilla.query.placement.list") {
		t.Errorf("error = %v, want the subject named", err)
	}
}

func TestSlowAnswer(t *testing.T) {
	_, nc := natsserver.StartT(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	serve(t, nc, func(r micro.Request) { <-release })
	c := New(nc)
	c.Timeout = 100 * time.Millisecond
	_, err := c.Placement(t.Context(), "web")
	if err == nil || err.Error() != "query placement.get: the status service did not answer in time" {
		t.Errorf("error = %v", err)
	}
}
