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
	"github.com/flotilla-dev/flotilla/events/reply"
)

var (
	// ErrNotFound: the named object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoStatusService: nothing answers the query subjects.
	ErrNoStatusService = errors.New("the status service is not running")
)

// DefaultTimeout bounds the wait for each message of a reply.
const DefaultTimeout = 10 * time.Second

// Client queries the status service.
type Client struct {
	nc *nats.Conn
	// Timeout bounds the wait for each message of a reply (the first one
	// includes the service's database work); a reply in many pieces may take
	// longer as a whole. The context's deadline, if any, bounds the whole.
	Timeout time.Duration
	// maxBytes caps a reply (events.QueryReplyMaxBytes when 0).
	maxBytes int64
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

// ResourcePlacement returns one ResourcePlacement with its status, as the
// user wrote it (its kind, namespace and name).
func (c *Client) ResourcePlacement(ctx context.Context, namespace, name string) (*api.ClusterResourcePlacement, error) {
	return c.Placement(ctx, api.PlacementKey(namespace, name))
}

// ResourcePlacements lists the ResourcePlacements of namespace (of every
// namespace when it is empty), filtered like Placements.
func (c *Client) ResourcePlacements(ctx context.Context, namespace, selector string) ([]api.ClusterResourcePlacement, error) {
	return call[[]api.ClusterResourcePlacement](ctx, c, events.QueryListPlacements,
		events.ListQuery{Kind: api.ResourcePlacementKind, Namespace: namespace, LabelSelector: selector})
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

// History returns a placement's snapshots, decisions, status transitions and a page of
// its staged update runs (q.SkipRuns leaves out the newest).
func (c *Client) History(ctx context.Context, q events.HistoryQuery) (*events.PlacementHistory, error) {
	h, err := call[events.PlacementHistory](ctx, c, events.QueryHistory, q)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// Takeovers lists takeover decisions.
func (c *Client) Takeovers(ctx context.Context, q events.TakeoverQuery) ([]events.TakeoverRecord, error) {
	return call[[]events.TakeoverRecord](ctx, c, events.QueryTakeovers, q)
}

// ClusterResourceOverride returns one ClusterResourceOverride, in the version it was applied in.
func (c *Client) ClusterResourceOverride(ctx context.Context, name string) (*api.ClusterResourceOverride, error) {
	o, err := call[api.ClusterResourceOverride](ctx, c, events.QueryGetOverride,
		events.OverrideQuery{Kind: api.ClusterResourceOverrideKind, Name: name})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// ClusterResourceOverrides lists the ClusterResourceOverrides, filtered like Placements.
func (c *Client) ClusterResourceOverrides(ctx context.Context, selector string) ([]api.ClusterResourceOverride, error) {
	return call[[]api.ClusterResourceOverride](ctx, c, events.QueryListOverrides,
		events.OverrideListQuery{Kind: api.ClusterResourceOverrideKind, LabelSelector: selector})
}

// StagedUpdateStrategy returns one ClusterStagedUpdateStrategy.
func (c *Client) StagedUpdateStrategy(ctx context.Context, name string) (*api.ClusterStagedUpdateStrategy, error) {
	return getStaged[api.ClusterStagedUpdateStrategy](ctx, c, api.ClusterStagedUpdateStrategyKind, name)
}

// StagedUpdateStrategies lists the ClusterStagedUpdateStrategies, filtered like Placements.
func (c *Client) StagedUpdateStrategies(ctx context.Context, selector string) ([]api.ClusterStagedUpdateStrategy, error) {
	return listStaged[api.ClusterStagedUpdateStrategy](ctx, c, api.ClusterStagedUpdateStrategyKind, selector)
}

// StagedUpdateRun returns one ClusterStagedUpdateRun with its status.
func (c *Client) StagedUpdateRun(ctx context.Context, name string) (*api.ClusterStagedUpdateRun, error) {
	return getStaged[api.ClusterStagedUpdateRun](ctx, c, api.ClusterStagedUpdateRunKind, name)
}

// StagedUpdateRuns lists the ClusterStagedUpdateRuns, filtered like Placements.
func (c *Client) StagedUpdateRuns(ctx context.Context, selector string) ([]api.ClusterStagedUpdateRun, error) {
	return listStaged[api.ClusterStagedUpdateRun](ctx, c, api.ClusterStagedUpdateRunKind, selector)
}

// ApprovalRequest returns one ClusterApprovalRequest.
func (c *Client) ApprovalRequest(ctx context.Context, name string) (*api.ClusterApprovalRequest, error) {
	return getStaged[api.ClusterApprovalRequest](ctx, c, api.ClusterApprovalRequestKind, name)
}

// ApprovalRequests lists the ClusterApprovalRequests, filtered like Placements.
func (c *Client) ApprovalRequests(ctx context.Context, selector string) ([]api.ClusterApprovalRequest, error) {
	return listStaged[api.ClusterApprovalRequest](ctx, c, api.ClusterApprovalRequestKind, selector)
}

// Eviction returns one ClusterResourcePlacementEviction with its status.
func (c *Client) Eviction(ctx context.Context, name string) (*api.ClusterResourcePlacementEviction, error) {
	return getDisruption[api.ClusterResourcePlacementEviction](ctx, c, api.ClusterResourcePlacementEvictionKind, name)
}

// Evictions lists the ClusterResourcePlacementEvictions, filtered like Placements.
func (c *Client) Evictions(ctx context.Context, selector string) ([]api.ClusterResourcePlacementEviction, error) {
	return listDisruptions[api.ClusterResourcePlacementEviction](ctx, c, api.ClusterResourcePlacementEvictionKind, selector)
}

// DisruptionBudget returns one ClusterResourcePlacementDisruptionBudget.
func (c *Client) DisruptionBudget(ctx context.Context, name string) (*api.ClusterResourcePlacementDisruptionBudget, error) {
	return getDisruption[api.ClusterResourcePlacementDisruptionBudget](ctx, c, api.ClusterResourcePlacementDisruptionBudgetKind, name)
}

// DisruptionBudgets lists the ClusterResourcePlacementDisruptionBudgets, filtered like Placements.
func (c *Client) DisruptionBudgets(ctx context.Context, selector string) ([]api.ClusterResourcePlacementDisruptionBudget, error) {
	return listDisruptions[api.ClusterResourcePlacementDisruptionBudget](ctx, c, api.ClusterResourcePlacementDisruptionBudgetKind, selector)
}

func getDisruption[T any](ctx context.Context, c *Client, kind, name string) (*T, error) {
	o, err := call[T](ctx, c, events.QueryGetDisruption, events.DisruptionKey{Kind: kind, Name: name})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

func listDisruptions[T any](ctx context.Context, c *Client, kind, selector string) ([]T, error) {
	return call[[]T](ctx, c, events.QueryListDisruptions, events.DisruptionListQuery{Kind: kind, LabelSelector: selector})
}

func getStaged[T any](ctx context.Context, c *Client, kind, name string) (*T, error) {
	o, err := call[T](ctx, c, events.QueryGetStagedUpdate, events.StagedUpdateKey{Kind: kind, Name: name})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

func listStaged[T any](ctx context.Context, c *Client, kind, selector string) ([]T, error) {
	return call[[]T](ctx, c, events.QueryListStagedUpdates, events.StagedUpdateListQuery{Kind: kind, LabelSelector: selector})
}

// The namespaced twins of the staged update kinds, for ResourcePlacements
// (StagedUpdateStrategy, StagedUpdateRun, ApprovalRequest), as the user wrote
// them: one by namespace and name, or those of a namespace ("": of every one).

// StagedUpdateStrategyIn returns one StagedUpdateStrategy.
func (c *Client) StagedUpdateStrategyIn(ctx context.Context, namespace, name string) (*api.ClusterStagedUpdateStrategy, error) {
	return getStaged[api.ClusterStagedUpdateStrategy](ctx, c, api.ClusterStagedUpdateStrategyKind, api.PlacementKey(namespace, name))
}

// StagedUpdateStrategiesIn lists StagedUpdateStrategies.
func (c *Client) StagedUpdateStrategiesIn(ctx context.Context, namespace, selector string) ([]api.ClusterStagedUpdateStrategy, error) {
	return listStagedIn[api.ClusterStagedUpdateStrategy](ctx, c, api.StagedUpdateStrategyKind, namespace, selector)
}

// StagedUpdateRunIn returns one StagedUpdateRun with its status.
func (c *Client) StagedUpdateRunIn(ctx context.Context, namespace, name string) (*api.ClusterStagedUpdateRun, error) {
	return getStaged[api.ClusterStagedUpdateRun](ctx, c, api.ClusterStagedUpdateRunKind, api.PlacementKey(namespace, name))
}

// StagedUpdateRunsIn lists StagedUpdateRuns.
func (c *Client) StagedUpdateRunsIn(ctx context.Context, namespace, selector string) ([]api.ClusterStagedUpdateRun, error) {
	return listStagedIn[api.ClusterStagedUpdateRun](ctx, c, api.StagedUpdateRunKind, namespace, selector)
}

// ApprovalRequestIn returns one ApprovalRequest.
func (c *Client) ApprovalRequestIn(ctx context.Context, namespace, name string) (*api.ClusterApprovalRequest, error) {
	return getStaged[api.ClusterApprovalRequest](ctx, c, api.ClusterApprovalRequestKind, api.PlacementKey(namespace, name))
}

// ApprovalRequestsIn lists ApprovalRequests.
func (c *Client) ApprovalRequestsIn(ctx context.Context, namespace, selector string) ([]api.ClusterApprovalRequest, error) {
	return listStagedIn[api.ClusterApprovalRequest](ctx, c, api.ApprovalRequestKind, namespace, selector)
}

func listStagedIn[T any](ctx context.Context, c *Client, kind, namespace, selector string) ([]T, error) {
	return call[[]T](ctx, c, events.QueryListStagedUpdates, events.StagedUpdateListQuery{Kind: kind, Namespace: namespace, LabelSelector: selector})
}

// ResourceOverride returns one ResourceOverride of a namespace.
func (c *Client) ResourceOverride(ctx context.Context, namespace, name string) (*api.ResourceOverride, error) {
	o, err := call[api.ResourceOverride](ctx, c, events.QueryGetOverride,
		events.OverrideQuery{Kind: api.ResourceOverrideKind, Namespace: namespace, Name: name})
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// ResourceOverrides lists the ResourceOverrides of a namespace, of every
// namespace when it is "", filtered like Placements.
func (c *Client) ResourceOverrides(ctx context.Context, namespace, selector string) ([]api.ResourceOverride, error) {
	return call[[]api.ResourceOverride](ctx, c, events.QueryListOverrides,
		events.OverrideListQuery{Kind: api.ResourceOverrideKind, Namespace: namespace, LabelSelector: selector})
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

// call asks endpoint and decodes its reply, which arrives in pieces on a
// private inbox (events/query.go): each piece is waited for with the
// client's Timeout, and the pieces are put together by reply.Assembler,
// which refuses a reply with a piece missing, repeated or out of order.
func call[T any](ctx context.Context, c *Client, endpoint string, request any) (T, error) {
	var zero T
	subject := events.QuerySubjectPrefix + endpoint
	data, err := json.Marshal(request)
	if err != nil {
		return zero, fmt.Errorf("query %s: %w", endpoint, err)
	}
	msg, err := c.receive(ctx, endpoint, subject, data)
	if err != nil {
		return zero, err
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

// receive publishes the request with a private inbox as its reply subject
// and returns the answer put together from the messages that arrive there.
func (c *Client) receive(ctx context.Context, endpoint, subject string, data []byte) (*reply.Piece, error) {
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("query %s: subscribe to the reply inbox: %w", endpoint, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	asm := reply.NewAssembler(c.maxBytes)
	// Room for a whole reply at the cap, however many pieces, so that a long
	// reply read slowly is not cut short as a slow consumer.
	if err := sub.SetPendingLimits(-1, 2*events.QueryReplyMaxBytes); err != nil {
		return nil, fmt.Errorf("query %s: %w", endpoint, err)
	}
	if err := c.nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, fmt.Errorf("query %s: %w", endpoint, err)
	}
	for {
		wait := ctx
		cancel := context.CancelFunc(func() {})
		if c.Timeout > 0 {
			wait, cancel = context.WithTimeout(ctx, c.Timeout)
		}
		msg, err := sub.NextMsgWithContext(wait)
		cancel()
		pieces, size := asm.Received()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return nil, fmt.Errorf("%w: nothing answers on %s; start it (make run starts every service) or point --nats at the NATS server it uses", ErrNoStatusService, subject)
		case errors.Is(err, context.DeadlineExceeded) && pieces == 0:
			return nil, fmt.Errorf("query %s: the status service did not answer in time", endpoint)
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("query %s: the status service stopped answering: %d pieces (%d bytes) of the reply arrived, not the last", endpoint, pieces, size)
		case err != nil:
			return nil, fmt.Errorf("query %s: %w", endpoint, err)
		}
		answer, err := asm.Add(reply.Piece{Header: msg.Header, Data: msg.Data})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", endpoint, err)
		}
		if answer != nil {
			return answer, nil
		}
	}
}
