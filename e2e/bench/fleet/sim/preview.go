package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// servePreviews plays every member's apply worker answering placement
// previews (events.PreviewMemberSubject), on the member's own preview inbox
// as the real worker does: an object the member's placement holds is
// NoChange (Update when its manifest changed), any other Create, and what it
// holds that the manifests no longer name Delete. One subscription serves the
// fleet; each request is answered in its own goroutine, so that the
// requester's concurrency, not this process, is what a run measures.
func (f *Fleet) servePreviews(ctx context.Context) error {
	nc := f.js.Conn()
	prefix, _ := events.PreviewMemberSubject("x")
	prefix = strings.TrimSuffix(prefix, "x")
	sub, err := nc.Subscribe(prefix+"*", func(m *nats.Msg) {
		member := f.byToken(strings.TrimPrefix(m.Subject, prefix))
		if member == nil || events.CheckPreviewReply(member.name, m.Reply) != nil {
			return
		}
		go func() {
			err := reply.Answer(nc, m.Reply, func(w io.Writer) error {
				req, err := events.DecodeMemberPreviewRequest(member.name, m.Data)
				if err != nil {
					return err
				}
				return json.NewEncoder(w).Encode(events.QueryReply[*events.MemberPreview]{Result: member.preview(req)})
			})
			if err != nil {
				member.log.Warn("preview answered with an error", "err", err)
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("simulated fleet: previews: %w", err)
	}
	<-ctx.Done()
	return sub.Unsubscribe()
}

// byToken is the member whose name is the subject token tok.
func (f *Fleet) byToken(tok string) *member {
	if m := f.byName[tok]; m != nil {
		return m
	}
	return f.byName[strings.ReplaceAll(tok, "_", ".")]
}

// preview is what the simulated member would do with req's manifests.
func (m *member) preview(req *events.MemberPreviewRequest) *events.MemberPreview {
	type heldObject struct {
		id   api.ResourceIdentifier
		hash string
	}
	held := map[manifest.Key]heldObject{}
	m.mu.Lock()
	if p := m.placements[req.Placement]; p != nil && p.desired.work != nil {
		for _, o := range manifest.Parse(p.desired.work.Manifests) {
			if o.Err == nil && o.Object != nil {
				held[o.Key()] = heldObject{o.Resource, o.Hash}
			}
		}
	}
	m.mu.Unlock()
	out := &events.MemberPreview{Cluster: m.name}
	for _, o := range manifest.Parse(req.Manifests) {
		op := events.ObjectPreview{ResourceIdentifier: o.Resource, Outcome: events.PreviewCreate}
		switch h, ok := held[o.Key()]; {
		case o.Err != nil:
			op.Outcome, op.Message = events.PreviewError, o.Err.Error()
		case ok && h.hash == o.Hash:
			op.Outcome = events.PreviewNoChange
		case ok:
			op.Outcome = events.PreviewUpdate
		}
		delete(held, o.Key())
		out.Objects = append(out.Objects, op)
	}
	for _, k := range slices.SortedFunc(maps.Keys(held), func(a, b manifest.Key) int { return strings.Compare(a.String(), b.String()) }) {
		out.Objects = append(out.Objects, events.ObjectPreview{ResourceIdentifier: held[k].id, Outcome: events.PreviewDelete})
	}
	return out
}
