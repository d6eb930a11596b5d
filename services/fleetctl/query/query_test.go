package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
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

// bigPlacement is a placement whose status names n clusters.
func bigPlacement(n int) api.ClusterResourcePlacement {
	crp := api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	for i := range n {
		crp.Status.PlacementStatuses = append(crp.Status.PlacementStatuses, api.ResourcePlacementStatus{
			ClusterName: fmt.Sprintf("member-%05d", i),
			Conditions: []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue, Reason: "ApplySucceeded",
				Message: "Successfully applied resources to the member cluster"}},
		})
	}
	return crp
}

// pieces splits the reply to a query for crp as the status service does.
func pieces(t *testing.T, crp api.ClusterResourcePlacement) []reply.Piece {
	t.Helper()
	var out []reply.Piece
	w := reply.NewWriter(0, func(p reply.Piece) error { out = append(out, p); return nil })
	if _, err := w.Write(mustJSON(t, events.QueryReply[api.ClusterResourcePlacement]{Result: crp})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 4 {
		t.Fatalf("the reply is %d pieces; the test wants at least 4", len(out))
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// publish sends p on the request's reply subject, as the status service does.
func publish(t *testing.T, nc *nats.Conn, r micro.Request, p reply.Piece) {
	if err := nc.PublishMsg(&nats.Msg{Subject: r.Reply(), Header: p.Header, Data: p.Data}); err != nil {
		t.Error(err)
	}
}

func TestReplyInPieces(t *testing.T) {
	crp := bigPlacement(6000)
	all := pieces(t, crp)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		maxSize int64
		send    func(t *testing.T, nc *nats.Conn, r micro.Request)
		wantErr string
	}{
		{
			name: "complete",
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				for _, p := range all {
					publish(t, nc, r, p)
				}
			},
		},
		{
			// Each piece within the timeout, the whole reply over it.
			name: "slow pieces", timeout: 700 * time.Millisecond,
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				for _, p := range all[:3] {
					publish(t, nc, r, p)
					time.Sleep(300 * time.Millisecond)
				}
				for _, p := range all[3:] {
					publish(t, nc, r, p)
				}
			},
		},
		{
			name: "a piece missing",
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				for i, p := range all {
					if i != 2 {
						publish(t, nc, r, p)
					}
				}
			},
			wantErr: "query placement.get: the reply is incomplete or corrupt: piece 2 is missing (piece 3 arrived in its place)",
		},
		{
			name: "a piece twice",
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				publish(t, nc, r, all[0])
				for _, p := range all {
					publish(t, nc, r, p)
				}
			},
			wantErr: "query placement.get: the reply is incomplete or corrupt: piece 0 arrived twice",
		},
		{
			name: "the service stops answering", timeout: 200 * time.Millisecond,
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				publish(t, nc, r, all[0])
				publish(t, nc, r, all[1])
			},
			wantErr: fmt.Sprintf("query placement.get: the status service stopped answering: 2 pieces (%d bytes) of the reply arrived, not the last", 2*events.QueryReplyPieceBytes),
		},
		{
			name: "an error after pieces",
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				publish(t, nc, r, all[0])
				_ = r.Error("500", "list placements: database unavailable", nil)
			},
			wantErr: "list placements: database unavailable",
		},
		{
			name: "over the cap", maxSize: 3 * events.QueryReplyPieceBytes,
			send: func(t *testing.T, nc *nats.Conn, r micro.Request) {
				for _, p := range all {
					publish(t, nc, r, p)
				}
			},
			wantErr: "query placement.get: the reply is over the cap on a query reply: more than 786432 bytes (0 MiB) at piece 3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, nc := natsserver.StartT(t)
			serve(t, nc, func(r micro.Request) { tc.send(t, nc, r) })
			c := New(nc)
			if tc.timeout > 0 {
				c.Timeout = tc.timeout
			}
			c.maxBytes = tc.maxSize
			got, err := c.Placement(t.Context(), "web")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, crp) {
				t.Errorf("the placement put together differs from the one sent")
			}
		})
	}
}
