package status

import (
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/platform/pipeline"
)

// Takeover outcomes as stored in takeover_decisions.outcome (001's check
// constraint), by the outcome an apply worker reports.
var takeoverOutcomes = map[string]string{
	takenOver:                          "taken",
	api.ManifestFailedToTakeOverReason: "refused",
	api.ManifestNotTakenOverReason:     "not-taken-over",
}

// takenOver is the outcome an apply worker reports for a takeover that happened.
const takenOver = "TakenOver"

// reportOutcomes maps stored outcomes back to the reported ones.
var reportOutcomes = func() map[string]string {
	m := map[string]string{}
	for k, v := range takeoverOutcomes {
		m[v] = k
	}
	return m
}()

// recordReport stores what an apply report says for history: the apply
// result, each takeover decision and each drift. The inbox makes it happen
// once per report.
func (s *server) recordReport(w *pipeline.Tx, ev cloudevents.Event, r *events.WorkReported) error {
	what := fmt.Sprintf("record report %s of %s on %s", ev.ID(), r.Placement, r.Cluster)
	if !r.Deleted {
		args, err := jsonArgs(manifestsOrEmpty(r.Manifests), r.Counts)
		if err != nil {
			return fmt.Errorf("record report %s: %w", ev.ID(), err)
		}
		w.Queue(what, `
			insert into apply_results (placement, cluster, resource_snapshot_index, results, counts, applied, available, event_id, observed_at)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			r.Placement, r.Cluster, r.ResourceIndex, args[0], args[1],
			r.Applied.Status == "True", r.Available.Status == "True", ev.ID(), r.ObservedAt)
	}
	if err := s.queueTakeovers(w, ev, r.Placement, r.Cluster, r.Takeovers, r.ObservedAt); err != nil {
		return err
	}
	for _, m := range r.Manifests {
		if len(m.Drifts) == 0 {
			continue
		}
		first := r.ObservedAt
		if m.FirstDriftedAt != nil && !m.FirstDriftedAt.IsZero() {
			first = *m.FirstDriftedAt
		}
		var gen *int64
		if m.ObservedGeneration != 0 {
			gen = &m.ObservedGeneration
		}
		args, err := jsonArgs(m.Drifts)
		if err != nil {
			return fmt.Errorf("record report %s: %w", ev.ID(), err)
		}
		// One row per drift episode: later observations of the same episode
		// (same first observation) update it.
		w.Queue(what, `
			insert into drift_reports
				(placement, cluster, api_group, version, kind, namespace, name, drifts, observed_generation, event_id, first_observed_at, last_observed_at)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			on conflict (placement, cluster, api_group, version, kind, namespace, name, first_observed_at) do update set
				drifts = excluded.drifts, observed_generation = excluded.observed_generation,
				event_id = excluded.event_id, last_observed_at = excluded.last_observed_at
			where excluded.last_observed_at >= drift_reports.last_observed_at`,
			r.Placement, r.Cluster, m.Resource.Group, m.Resource.Version, m.Resource.Kind, m.Resource.Namespace, m.Resource.Name,
			args[0], gen, ev.ID(), first, r.ObservedAt)
	}
	return nil
}

func manifestsOrEmpty(m []events.ManifestResult) []events.ManifestResult {
	if m == nil {
		return []events.ManifestResult{}
	}
	return m
}

func diffsOrEmpty(d []api.PatchDetail) []api.PatchDetail {
	if d == nil {
		return []api.PatchDetail{}
	}
	return d
}

// recordTakeovers stores the takeover decisions of an apply run that did not
// fit in its report. The inbox makes it happen once per event.
func (s *server) recordTakeovers(w *pipeline.Tx, ev cloudevents.Event, d *events.TakeoversDecided) error {
	return s.queueTakeovers(w, ev, d.Placement, d.Cluster, d.Takeovers, ev.Time())
}

// queueTakeovers queues the rows of takeover decisions; one decided at no
// time stands at observed.
func (s *server) queueTakeovers(w *pipeline.Tx, ev cloudevents.Event, placement, cluster string, ts []events.TakeoverDecision, observed time.Time) error {
	for _, t := range ts {
		outcome, ok := takeoverOutcomes[t.Outcome]
		if !ok {
			s.log.Warn("takeover decision with an unknown outcome not recorded", "id", ev.ID(),
				"placement", placement, "cluster", cluster, "object", t.Resource.Name, "outcome", t.Outcome)
			continue
		}
		decided := t.DecidedAt
		if decided.IsZero() {
			decided = observed
		}
		args, err := jsonArgs(diffsOrEmpty(t.Diffs))
		if err != nil {
			return fmt.Errorf("record report %s: %w", ev.ID(), err)
		}
		w.Queue(fmt.Sprintf("record takeovers %s of %s on %s", ev.ID(), placement, cluster), `
			insert into takeover_decisions
				(placement, cluster, api_group, version, kind, namespace, name, mode, comparison, outcome, diff_paths, event_id, decided_at)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			placement, cluster, t.Resource.Group, t.Resource.Version, t.Resource.Kind, t.Resource.Namespace, t.Resource.Name,
			string(t.Mode), string(t.Comparison), outcome, args[0], ev.ID(), decided)
	}
	return nil
}
