// Package preview answers fleetctl apply --dry-run=server: for each placement
// of a file, where the scheduler would put it, what the rollout would send each
// cluster and in which order, and what each member's apply worker would do
// with every object, found by server-side dry run on the member. It asks the
// services that own each part (events/preview.go) and changes nothing.
package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
)

// DefaultMemberTimeout is how long a member's apply worker has to answer.
const DefaultMemberTimeout = 30 * time.Second

// DefaultConcurrency bounds the members asked at once.
const DefaultConcurrency = 64

// Options say how long to wait and how many members to ask at once.
type Options struct {
	// HubTimeout bounds the wait for each message of the scheduler's and the
	// rollout's answers.
	HubTimeout time.Duration
	// MemberTimeout bounds the wait for each message of a member's answer; a
	// member that does not answer in time is named in a partial answer.
	MemberTimeout time.Duration
	Concurrency   int
}

// Input is what the file holds: its placements, and its hub objects and
// overrides, which are laid over the hub's.
type Input struct {
	Placements []api.ClusterResourcePlacement
	Objects    []json.RawMessage
	Overrides  []events.OverrideUpserted
}

// Result is the whole preview.
type Result struct {
	Placements []Placement `json:"placements"`
	// Partial names the members that did not answer: their objects are
	// missing from the preview.
	Partial []string `json:"partial,omitempty"`
}

// Placement is the preview of one placement.
type Placement struct {
	Name       string                    `json:"name"`
	Scheduling *events.SchedulingPreview `json:"scheduling"`
	Rollout    *events.RolloutPreview    `json:"rollout,omitempty"`
	Members    []Member                  `json:"members,omitempty"`
}

// Member is what one member's apply worker answered, or why it did not.
type Member struct {
	Cluster string                 `json:"cluster"`
	Objects []events.ObjectPreview `json:"objects,omitempty"`
	// NoAnswer is set when the member did not answer in time; Error when it
	// answered with an error or its overrides failed.
	NoAnswer bool   `json:"noAnswer,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ErrPartial: some members did not answer; the preview lacks their objects.
var ErrPartial = errors.New("partial preview")

// Run previews every placement of in, in order.
func Run(ctx context.Context, nc *nats.Conn, in Input, opts Options) (*Result, error) {
	opts = opts.withDefaults()
	out := &Result{}
	for _, crp := range in.Placements {
		p, err := placement(ctx, nc, crp, in, opts)
		if err != nil {
			return nil, err
		}
		for _, m := range p.Members {
			if m.NoAnswer {
				out.Partial = append(out.Partial, m.Cluster)
			}
		}
		out.Placements = append(out.Placements, *p)
	}
	slices.Sort(out.Partial)
	out.Partial = slices.Compact(out.Partial)
	return out, nil
}

func (o Options) withDefaults() Options {
	if o.HubTimeout <= 0 {
		o.HubTimeout = 10 * time.Second
	}
	if o.MemberTimeout <= 0 {
		o.MemberTimeout = DefaultMemberTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o
}

// placement asks the scheduler, then the rollout, then every chosen member.
func placement(ctx context.Context, nc *nats.Conn, crp api.ClusterResourcePlacement, in Input, opts Options) (*Placement, error) {
	sched, err := ask[*events.SchedulingPreview](ctx, nc, events.PreviewSchedulingSubject, "", events.SchedulingPreviewRequest{Placement: crp}, opts.HubTimeout)
	if err != nil {
		return nil, fmt.Errorf("preview %s: the scheduler: %w", crp.Name, err)
	}
	out := &Placement{Name: crp.Name, Scheduling: sched}
	clusters := make([]string, len(sched.Chosen))
	for i, c := range sched.Chosen {
		clusters[i] = c.Cluster
	}
	roll, err := ask[*events.RolloutPreview](ctx, nc, events.PreviewRolloutSubject, "",
		events.RolloutPreviewRequest{Placement: crp, Clusters: clusters, Objects: in.Objects, Overrides: in.Overrides}, opts.HubTimeout)
	if err != nil {
		return nil, fmt.Errorf("preview %s: the rollout: %w", crp.Name, err)
	}
	out.Rollout = roll
	out.Members = members(ctx, nc, crp.Name, roll.Clusters, opts)
	return out, nil
}

// members asks each cluster's apply worker, at most opts.Concurrency at once.
func members(ctx context.Context, nc *nats.Conn, placement string, renders []events.ClusterRender, opts Options) []Member {
	out := make([]Member, len(renders))
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	for i, r := range renders {
		out[i].Cluster = r.Cluster
		if r.Error != "" {
			out[i].Error = "overrides fail here, nothing would be sent: " + r.Error
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = member(ctx, nc, placement, r, opts.MemberTimeout)
		})
	}
	wg.Wait()
	return out
}

// member asks one cluster's apply worker, on that member's own preview inbox.
func member(ctx context.Context, nc *nats.Conn, placement string, r events.ClusterRender, timeout time.Duration) Member {
	out := Member{Cluster: r.Cluster}
	subject, err := events.PreviewMemberSubject(r.Cluster)
	if err == nil {
		var prefix string
		prefix, err = events.PreviewReplyPrefix(r.Cluster)
		if err == nil {
			var p *events.MemberPreview
			p, err = ask[*events.MemberPreview](ctx, nc, subject, prefix+"."+nuid.Next(),
				events.MemberPreviewRequest{Cluster: r.Cluster, Placement: placement, Manifests: r.Manifests, ApplyStrategy: r.ApplyStrategy}, timeout)
			if err == nil {
				out.Objects = p.Objects
			}
		}
	}
	switch {
	case errors.Is(err, reply.ErrNoAnswer):
		out.NoAnswer, out.Error = true, fmt.Sprintf("the apply worker of %s did not answer within %s", r.Cluster, timeout)
	case err != nil:
		out.Error = err.Error()
	}
	return out
}

// ask sends req on subject and decodes the answer.
func ask[T any](ctx context.Context, nc *nats.Conn, subject, replyTo string, req any, timeout time.Duration) (T, error) {
	data, err := json.Marshal(req)
	if err != nil {
		var zero T
		return zero, err
	}
	out, err := reply.Call[T](ctx, nc, subject, replyTo, data, timeout)
	if errors.Is(err, nats.ErrMaxPayload) {
		// Requests are one message (answers come in pieces): a file or a cluster's
		// manifests over the server's limit cannot be previewed at once.
		err = fmt.Errorf("the request is %d bytes, over the NATS server's limit of %d: preview fewer or smaller objects at a time: %w",
			len(data), nc.MaxPayload(), err)
	}
	return out, err
}
