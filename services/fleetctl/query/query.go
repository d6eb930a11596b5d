// Package query asks the status service about placements, members, history
// and takeover decisions, over NATS request-reply per the contract in
// events/query.go.
package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

var (
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoStatusService: nothing answers the query subjects.
	ErrNoStatusService = errors.New("the status service is not running")
)

// DefaultTimeout bounds a query whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Client queries the status service.
type Client struct {
	nc *nats.Conn
	// Timeout bounds each query when the context has no deadline.
	Timeout time.Duration
}

// New returns a client on nc.
func New(nc *nats.Conn) *Client {
	return &Client{nc: nc, Timeout: DefaultTimeout}
}

// Placement returns one placement with its status.
func (c *Client) Placement(ctx context.Context, name string) (*api.ClusterResourcePlacement, error) {
	p, err := call[api.ClusterResourcePlacement](ctx, c, events.QueryGetPlacement, events.NameQuery{Name: name})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Placements lists placements, filtered by a label selector in kubectl syntax
// when selector is not empty.
func (c *Client) Placements(ctx context.Context, selector string) ([]api.ClusterResourcePlacement, error) {
	return call[[]api.ClusterResourcePlacement](ctx, c, events.QueryListPlacements, events.ListQuery{LabelSelector: selector})
}

// Member returns one member cluster with its status.
func (c *Client) Member(ctx context.Context, name string) (*api.MemberCluster, error) {
	m, err := call[api.MemberCluster](ctx, c, events.QueryGetMember, events.NameQuery{Name: name})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Members lists member clusters, filtered like Placements.
func (c *Client) Members(ctx context.Context, selector string) ([]api.MemberCluster, error) {
	return call[[]api.MemberCluster](ctx, c, events.QueryListMembers, events.ListQuery{LabelSelector: selector})
}

// History returns a placement's snapshots, decisions and status transitions.
func (c *Client) History(ctx context.Context, name string) (*events.PlacementHistory, error) {
	h, err := call[events.PlacementHistory](ctx, c, events.QueryHistory, events.NameQuery{Name: name})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// Takeovers lists takeover decisions.
func (c *Client) Takeovers(ctx context.Context, q events.TakeoverQuery) ([]events.TakeoverRecord, error) {
	return call[[]events.TakeoverRecord](ctx, c, events.QueryTakeovers, q)
}

// Error is an error the status service answered with.
type Error struct {
	Endpoint string
	Code     string
	Message  string
	NotFound bool
}

func (e *Error) Error() string {
	return e.Message
}

// Is makes errors.Is(err, ErrNotFound) true for a not-found answer.
func (e *Error) Is(target error) bool {
	return target == ErrNotFound && e.NotFound
}

func call[T any](ctx context.Context, c *Client, endpoint string, request any) (T, error) {
	var zero T
	subject := events.QuerySubjectPrefix + endpoint
	data, err := json.Marshal(request)
	if err != nil {
		return zero, fmt.Errorf("query %s: %w", endpoint, err)
	}
	if _, ok := ctx.Deadline(); !ok && c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return zero, fmt.Errorf("%w: nothing answers on %s; start it (make run starts every service) or point --nats at the NATS server it uses", ErrNoStatusService, subject)
	case errors.Is(err, context.DeadlineExceeded):
		return zero, fmt.Errorf("query %s: the status service did not answer in time", endpoint)
	case err != nil:
		return zero, fmt.Errorf("query %s: %w", endpoint, err)
	}

	var reply events.QueryReply[T]
	decodeErr := json.Unmarshal(msg.Data, &reply)
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if reply.Error == "" && decodeErr != nil {
		if desc := msg.Header.Get(micro.ErrorHeader); desc != "" {
			reply.Error = desc
		}
	}
	if reply.Error != "" {
		return zero, &Error{Endpoint: endpoint, Code: code, Message: reply.Error, NotFound: reply.NotFound || code == "404"}
	}
	if decodeErr != nil {
		return zero, fmt.Errorf("query %s: cannot read the status service's answer: %w", endpoint, decodeErr)
	}
	return reply.Result, nil
}
