package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// QueryVersion is the version the query service announces.
const QueryVersion = "1.0.0"

// queryTimeout bounds one query's database work.
const queryTimeout = 10 * time.Second

// Query limits.
const (
	DefaultTakeoverLimit = 100
	MaxTakeoverLimit     = 10000
	// maxTransitions bounds the status transitions a history reply carries
	// (the newest ones).
	maxTransitions = 1000
	// placementPage and memberPage are the rows a list reads from PostgreSQL
	// at a time: fewer placements, whose status may name thousands of
	// clusters.
	placementPage = 20
	memberPage    = 500
)

// Error codes of error replies (in the micro error headers).
const (
	codeBadRequest = "400"
	codeNotFound   = "404"
	codeTooLarge   = "413"
	codeInternal   = "500"
)

// errNotFound marks a query for a name that does not exist.
var errNotFound = errors.New("not found")

// badRequest marks a query that cannot be answered as asked.
type badRequest struct{ err error }

func (e badRequest) Error() string { return e.err.Error() }

// serveQueries answers queries (events.QueryService) until ctx ends. Each
// endpoint listens on events.QuerySubjectPrefix + its name, in micro's
// default queue group, so replicas share the load; replies travel in bounded
// pieces (query_reply.go).
func (s *server) serveQueries(ctx context.Context, nc *nats.Conn) error {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        events.QueryService,
		Version:     QueryVersion,
		Description: "Flotilla placement and member status, history, takeover decisions, overrides and staged updates",
	})
	if err != nil {
		return fmt.Errorf("start query service: %w", err)
	}
	endpoints := []struct {
		name    string
		handler micro.Handler
	}{
		{events.QueryGetPlacement, whole(ctx, s, nc, (*server).getPlacement)},
		{events.QueryListPlacements, list(ctx, s, nc, (*server).listPlacements)},
		{events.QueryGetMember, whole(ctx, s, nc, (*server).getMember)},
		{events.QueryListMembers, list(ctx, s, nc, (*server).listMembers)},
		{events.QueryHistory, whole(ctx, s, nc, (*server).history)},
		{events.QueryTakeovers, whole(ctx, s, nc, (*server).takeovers)},
		{events.QueryGetOverride, whole(ctx, s, nc, (*server).getOverride)},
		{events.QueryListOverrides, list(ctx, s, nc, (*server).listOverrides)},
		{events.QueryGetStagedUpdate, whole(ctx, s, nc, (*server).getStaged)},
		{events.QueryListStagedUpdates, list(ctx, s, nc, (*server).listStaged)},
		{events.QueryGetDisruption, whole(ctx, s, nc, (*server).getDisruption)},
		{events.QueryListDisruptions, list(ctx, s, nc, (*server).listDisruptions)},
	}
	for _, e := range endpoints {
		// micro endpoint names allow no dots; the subject keeps the contract's name.
		name := strings.ReplaceAll(e.name, ".", "-")
		if err := svc.AddEndpoint(name, e.handler, micro.WithEndpointSubject(events.QuerySubjectPrefix+e.name)); err != nil {
			_ = svc.Stop()
			return fmt.Errorf("start query endpoint %s: %w", e.name, err)
		}
	}
	s.log.Info("answering queries", "service", events.QueryService, "subjects", events.QuerySubjectPrefix+">")
	<-ctx.Done()
	if err := svc.Stop(); err != nil {
		return fmt.Errorf("stop query service: %w", err)
	}
	return nil
}

func requireName(q events.NameQuery) error {
	if q.Name == "" {
		return badRequest{errors.New("a name is required")}
	}
	return nil
}

func selector(q events.ListQuery) (labels.Selector, error) {
	if q.LabelSelector == "" {
		return labels.Everything(), nil
	}
	sel, err := labels.Parse(q.LabelSelector)
	if err != nil {
		return nil, badRequest{fmt.Errorf("label selector %q: %w", q.LabelSelector, err)}
	}
	return sel, nil
}

// placementQuery selects live placements (name, placement) with their status.
const placementQuery = `
	select p.name, p.placement, s.status
	from status_placements p left join placement_status s on s.placement = p.name
	where p.placement is not null and not p.deleted`

// storedPlacement is a placement as a reply carries it: the stored
// placement with the stored status in place. The status names every
// cluster (megabytes at 5,000 clusters), so it goes out as stored, never
// decoded and encoded again; the labels are read for selectors.
type storedPlacement struct {
	key    string // the placement key (api.PlacementKey)
	json   json.RawMessage
	labels map[string]string
}

func (p storedPlacement) MarshalJSON() ([]byte, error) { return p.json, nil }

func scanPlacement(row pgx.CollectableRow) (keyed[storedPlacement], error) {
	var (
		crp               keyed[storedPlacement]
		placement, status []byte
	)
	if err := row.Scan(&crp.key, &placement, &status); err != nil {
		return crp, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(placement, &fields); err != nil {
		return crp, fmt.Errorf("placement %s: %w", crp.key, err)
	}
	var meta struct {
		Labels map[string]string `json:"labels"`
	}
	if m := fields["metadata"]; m != nil {
		if err := json.Unmarshal(m, &meta); err != nil {
			return crp, fmt.Errorf("placement %s: metadata: %w", crp.key, err)
		}
	}
	if len(status) > 0 {
		fields["status"] = status
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return crp, fmt.Errorf("placement %s: %w", crp.key, err)
	}
	if ns, _ := api.SplitPlacementKey(crp.key); ns != "" {
		// A ResourcePlacement is shown as the user wrote it: its own kind,
		// namespace and name, and its conditions' ResourcePlacement names.
		var rp api.ClusterResourcePlacement
		if err := json.Unmarshal(raw, &rp); err != nil {
			return crp, fmt.Errorf("placement %s: %w", crp.key, err)
		}
		if raw, err = json.Marshal(api.ExternalPlacement(&rp)); err != nil {
			return crp, fmt.Errorf("placement %s: %w", crp.key, err)
		}
	}
	crp.item = storedPlacement{key: crp.key, json: raw, labels: meta.Labels}
	return crp, nil
}

func (s *server) getPlacement(ctx context.Context, q events.NameQuery) (storedPlacement, error) {
	if err := requireName(q); err != nil {
		return storedPlacement{}, err
	}
	rows, err := s.pool.Query(ctx, placementQuery+` and p.name = $1`, q.Name)
	if err != nil {
		return storedPlacement{}, fmt.Errorf("get placement %s: %w", q.Name, err)
	}
	crp, err := pgx.CollectExactlyOneRow(rows, scanPlacement)
	if errors.Is(err, pgx.ErrNoRows) {
		return crp.item, fmt.Errorf("clusterresourceplacement %q %w", q.Name, errNotFound)
	}
	if err != nil {
		return crp.item, fmt.Errorf("get placement %s: %w", q.Name, err)
	}
	return crp.item, nil
}

// listed reports whether a list of placements asked for by q holds the
// placement whose key is key: ClusterResourcePlacements, or ResourcePlacements
// (of one namespace) when q asks for those.
func listed(q events.ListQuery, key string) bool {
	ns, _ := api.SplitPlacementKey(key)
	if q.Kind != api.ResourcePlacementKind {
		return ns == ""
	}
	return ns != "" && (q.Namespace == "" || q.Namespace == ns)
}

// listPlacements emits the live placements that match the query's selector,
// by name, reading placementPage of them at a time from one snapshot.
func (s *server) listPlacements(ctx context.Context, q events.ListQuery, emit func(storedPlacement) error) error {
	sel, err := selector(q)
	if err != nil {
		return err
	}
	err = s.snapshot(ctx, func(tx pgx.Tx) error {
		return keyset(ctx, tx, placementQuery+` and p.name > $1 order by p.name limit $2`, placementPage, scanPlacement,
			func(crp storedPlacement) error {
				if !listed(q, crp.key) || !sel.Matches(labels.Set(crp.labels)) {
					return nil
				}
				return emit(crp)
			})
	})
	if err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	return nil
}

func (s *server) scanMember(row pgx.CollectableRow) (keyed[api.MemberCluster], error) {
	var (
		mc  keyed[api.MemberCluster]
		raw []byte
		m   fold.MemberInputs
	)
	if err := row.Scan(&mc.key, &raw); err != nil {
		return mc, err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return mc, err
	}
	mc.item = fold.Member(&m, s.now())
	return mc, nil
}

func (s *server) getMember(ctx context.Context, q events.NameQuery) (api.MemberCluster, error) {
	if err := requireName(q); err != nil {
		return api.MemberCluster{}, err
	}
	rows, err := s.pool.Query(ctx, `select name, inputs from status_members where name = $1`, q.Name)
	if err != nil {
		return api.MemberCluster{}, fmt.Errorf("get member %s: %w", q.Name, err)
	}
	mc, err := pgx.CollectExactlyOneRow(rows, s.scanMember)
	if errors.Is(err, pgx.ErrNoRows) {
		return mc.item, fmt.Errorf("membercluster %q %w", q.Name, errNotFound)
	}
	if err != nil {
		return mc.item, fmt.Errorf("get member %s: %w", q.Name, err)
	}
	return mc.item, nil
}

// listMembers emits the member clusters that match the query's selector, by
// name, reading memberPage of them at a time from one snapshot.
func (s *server) listMembers(ctx context.Context, q events.ListQuery, emit func(api.MemberCluster) error) error {
	sel, err := selector(q)
	if err != nil {
		return err
	}
	err = s.snapshot(ctx, func(tx pgx.Tx) error {
		return keyset(ctx, tx, `select name, inputs from status_members where name > $1 order by name limit $2`, memberPage, s.scanMember,
			func(mc api.MemberCluster) error {
				if !sel.Matches(labels.Set(mc.Labels)) {
					return nil
				}
				return emit(mc)
			})
	})
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	return nil
}

// history answers fleetctl history: the placement's revisions (from the
// snapshot events), its scheduling decisions (the scheduler's history) and
// its condition transitions, oldest first. A deleted placement keeps its history.
func (s *server) history(ctx context.Context, q events.HistoryQuery) (events.PlacementHistory, error) {
	h := events.PlacementHistory{Placement: q.Name, Snapshots: []events.SnapshotRecord{}, Decisions: []events.DecisionRecord{}, RunsSkipped: q.SkipRuns}
	if err := requireName(events.NameQuery{Name: q.Name}); err != nil {
		return h, err
	}
	if q.SkipRuns < 0 {
		return h, badRequest{fmt.Errorf("skipRuns %d: must not be negative", q.SkipRuns)}
	}
	var known bool
	if err := s.pool.QueryRow(ctx, `select exists (select 1 from status_placements where name = $1 and placement is not null)`,
		q.Name).Scan(&known); err != nil {
		return h, fmt.Errorf("history of %s: %w", q.Name, err)
	}
	if !known {
		return h, fmt.Errorf("clusterresourceplacement %q %w", q.Name, errNotFound)
	}

	rows, err := s.pool.Query(ctx, `
		select distinct on (revision) revision, content_hash, selected_resources, created_at
		from placement_revisions where placement = $1
		order by revision, created_at`, q.Name)
	if err != nil {
		return h, fmt.Errorf("history of %s: revisions: %w", q.Name, err)
	}
	h.Snapshots, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.SnapshotRecord, error) {
		var (
			r   events.SnapshotRecord
			raw []byte
		)
		if err := row.Scan(&r.Index, &r.Hash, &raw, &r.CreatedAt); err != nil {
			return r, err
		}
		return r, json.Unmarshal(raw, &r.Resources)
	})
	if err != nil {
		return h, fmt.Errorf("history of %s: revisions: %w", q.Name, err)
	}

	rows, err = s.pool.Query(ctx, `
		select policy_generation, cluster, action, affinity_score, topology_spread_score, reason, decided_at
		from scheduling_decisions where placement = $1
		order by decided_at, id`, q.Name)
	if err != nil {
		return h, fmt.Errorf("history of %s: decisions: %w", q.Name, err)
	}
	h.Decisions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.DecisionRecord, error) {
		var r events.DecisionRecord
		err := row.Scan(&r.PolicyGeneration, &r.Cluster, &r.Action, &r.AffinityScore, &r.TopologySpreadScore, &r.Reason, &r.DecidedAt)
		return r, err
	})
	if err != nil {
		return h, fmt.Errorf("history of %s: decisions: %w", q.Name, err)
	}

	rows, err = s.pool.Query(ctx, `
		select coalesce(cluster, ''), condition_type, status, reason, message, at
		from (select * from placement_status_transitions where placement = $1 order by at desc, id desc limit $2) t
		order by at, id`, q.Name, maxTransitions)
	if err != nil {
		return h, fmt.Errorf("history of %s: transitions: %w", q.Name, err)
	}
	h.Status, err = pgx.CollectRows(rows, pgx.RowToStructByPos[events.ConditionRecord])
	if err != nil {
		return h, fmt.Errorf("history of %s: transitions: %w", q.Name, err)
	}
	if h.Runs, h.RunsLeftOut, err = s.runHistory(ctx, q.Name, q.SkipRuns); err != nil {
		return h, fmt.Errorf("history of %s: %w", q.Name, err)
	}
	if h.Failovers, err = s.failoverHistory(ctx, q.Name); err != nil {
		return h, fmt.Errorf("history of %s: %w", q.Name, err)
	}
	return h, nil
}

// takeovers lists takeover decisions, newest first.
func (s *server) takeovers(ctx context.Context, q events.TakeoverQuery) ([]events.TakeoverRecord, error) {
	limit := q.Limit
	switch {
	case limit < 0:
		return nil, badRequest{fmt.Errorf("limit %d: must not be negative", limit)}
	case limit == 0:
		limit = DefaultTakeoverLimit
	case limit > MaxTakeoverLimit:
		limit = MaxTakeoverLimit
	}
	rows, err := s.pool.Query(ctx, `
		select placement, cluster, api_group, version, kind, namespace, name, mode, comparison, outcome, diff_paths, decided_at
		from takeover_decisions
		where $1 = '' or placement = $1
		order by decided_at desc, id desc
		limit $2`, q.Placement, limit)
	if err != nil {
		return nil, fmt.Errorf("list takeovers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.TakeoverRecord, error) {
		var (
			r         events.TakeoverRecord
			mode, cmp string
			outcome   string
			diffs     []byte
		)
		res := &r.Resource
		if err := row.Scan(&r.Placement, &r.Cluster, &res.Group, &res.Version, &res.Kind, &res.Namespace, &res.Name,
			&mode, &cmp, &outcome, &diffs, &r.DecidedAt); err != nil {
			return r, err
		}
		r.Mode, r.Comparison = api.WhenToTakeOverType(mode), api.ComparisonOptionType(cmp)
		r.Outcome = reportOutcomes[outcome]
		if r.Outcome == "" {
			r.Outcome = outcome
		}
		if err := json.Unmarshal(diffs, &r.Diffs); err != nil {
			return r, err
		}
		if len(r.Diffs) == 0 {
			r.Diffs = nil
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list takeovers: %w", err)
	}
	if out == nil {
		out = []events.TakeoverRecord{}
	}
	return out, nil
}
