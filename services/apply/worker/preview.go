package worker

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/reply"
)

// previewTimeout bounds one preview's work on the member, so that a stuck
// member frees the worker for the next request (the requester has given up
// long before).
const previewTimeout = 2 * time.Minute

// servePreviews answers this member's placement previews
// (events.PreviewMemberSubject) until ctx ends, on the member's own preview
// inbox only (events.CheckPreviewReply): a request for another cluster, or
// with another reply subject, is refused. Replicas of the worker share a
// queue group, so one answers.
func (w *Worker) servePreviews(ctx context.Context) error {
	subject, err := events.PreviewMemberSubject(w.cfg.Cluster)
	if err != nil {
		return err
	}
	cluster := w.cfg.Cluster
	accept := func(m *nats.Msg) error { return events.CheckPreviewReply(cluster, m.Reply) }
	return reply.Serve(ctx, w.cfg.JetStream.Conn(), subject, bus.ApplyUserPrefix+subjectTokenOr(cluster), w.log, accept,
		func(ctx context.Context, m *nats.Msg, out io.Writer) error {
			req, err := events.DecodeMemberPreviewRequest(cluster, m.Data)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, previewTimeout)
			defer cancel()
			p, err := w.applier.Preview(ctx, req)
			if err != nil {
				return err
			}
			return json.NewEncoder(out).Encode(events.QueryReply[*events.MemberPreview]{Result: p})
		})
}

// subjectTokenOr is cluster as a subject token (the name itself when it
// cannot be one, which PreviewMemberSubject refused already).
func subjectTokenOr(cluster string) string {
	tok, err := bus.SubjectToken(cluster)
	if err != nil {
		return cluster
	}
	return tok
}
