package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// requestConfinement is what member's worker may do with the catalogue's
// request-reply subjects (events.Requests): answer its own requests on its own
// preview inbox, and nothing else (ask no service, answer no other member's
// request, reply on no other inbox).
func requestConfinement(member string, others []string) confinement {
	tok := func(name string) string { return strings.ReplaceAll(name, ".", "_") } // bus.SubjectToken
	fill := func(pattern, cluster string) string {
		s := strings.ReplaceAll(pattern, "{cluster}", tok(cluster))
		s = strings.ReplaceAll(s, "{token}", "r1")
		return strings.ReplaceAll(s, "*", "placement.get")
	}
	var c confinement
	for _, r := range events.Requests() {
		if slices.Contains(r.Senders, "hub") {
			c.pubDeny = append(c.pubDeny, fill(r.Subject, member)) // no member asks
		}
		if r.Answerer != events.ApplyAnswerer {
			c.subDeny = append(c.subDeny, fill(r.Subject, member))
			continue
		}
		reply := fill(r.Reply, member)
		c.subAllow = append(c.subAllow, fill(r.Subject, member))
		c.pubAllow = append(c.pubAllow, reply)
		c.pubDeny = append(c.pubDeny, reply+".more", strings.TrimSuffix(reply, ".r1")+"x.r1")
		for _, o := range others {
			c.subDeny = append(c.subDeny, fill(r.Subject, o))
			c.pubDeny = append(c.pubDeny, fill(r.Reply, o))
		}
	}
	return c
}

// with is c and d together.
func (c confinement) with(d confinement) confinement {
	return confinement{
		pubAllow:           slices.Concat(c.pubAllow, d.pubAllow),
		pubDeny:            slices.Concat(c.pubDeny, d.pubDeny),
		subAllow:           slices.Concat(c.subAllow, d.subAllow),
		subDeny:            slices.Concat(c.subDeny, d.subDeny),
		pubDenyDestructive: slices.Concat(c.pubDenyDestructive, d.pubDenyDestructive),
	}
}

// answerPreview plays the worker's side of a placement preview with its own credentials:
// it takes its preview requests and answers on its own preview inbox, where the hub's
// requester reads the answer; an answer to any other reply subject is refused by NATS.
func answerPreview(t *testing.T, control, nc *nats.Conn, member string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	subject, err := events.PreviewMemberSubject(member)
	if err != nil {
		t.Fatal(err)
	}
	serving, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = reply.Serve(serving, nc, subject, "", slog.New(slog.DiscardHandler), nil, func(_ context.Context, m *nats.Msg, w io.Writer) error {
			return json.NewEncoder(w).Encode(events.QueryReply[events.MemberPreview]{Result: events.MemberPreview{Cluster: member}})
		})
	}()
	defer func() { stop(); <-done }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	prefix, err := events.PreviewReplyPrefix(member)
	if err != nil {
		t.Fatal(err)
	}
	req := []byte(`{"cluster":"` + member + `","placement":"web","manifests":[]}`)
	// The worker's subscription is made by Serve's goroutine: ask until it answers.
	poll.Until(t, 30*time.Second, "the preview of "+member+" answered on its own preview inbox", func() error {
		got, err := reply.Call[events.MemberPreview](ctx, control, subject, prefix+".r1", req, 2*time.Second)
		if err != nil {
			return err
		}
		if got.Cluster != member {
			return fmt.Errorf("answered for %q", got.Cluster)
		}
		return nil
	})
	// The hub's own inbox is not the member's to answer on: the answer never arrives.
	if _, err := reply.Call[events.MemberPreview](ctx, control, subject, control.NewInbox(), req, 2*time.Second); !errors.Is(err, reply.ErrNoAnswer) {
		t.Errorf("%s answered on the requester's inbox: %v", member, err)
	}
}
