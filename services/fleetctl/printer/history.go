package printer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/events"
)

// History prints a placement's history: the resource snapshots (revisions),
// the scheduling decisions and the status transitions, oldest first. Table
// (and Wide) print sections; YAML and JSON print the record as is.
func (p Printer) History(w io.Writer, h *events.PlacementHistory) error {
	if p.Output.Format != Table && p.Output.Format != Wide {
		return printStructured(w, p.Output, h)
	}
	fmt.Fprintf(w, "Placement: %s\n", h.Placement)

	fmt.Fprintf(w, "\nRevisions (resource snapshots): %d\n", len(h.Snapshots))
	if len(h.Snapshots) > 0 {
		rows := make([][]string, 0, len(h.Snapshots))
		for _, s := range h.Snapshots {
			res := make([]string, 0, len(s.Resources))
			for _, r := range s.Resources {
				res = append(res, Resource(r))
			}
			rows = append(rows, []string{strconv.FormatInt(s.Index, 10), shortHash(s.Hash, p.Output.Format == Wide), timestamp(s.CreatedAt), strings.Join(res, ", ")})
		}
		if err := p.indentedTable(w, []string{"INDEX", "HASH", "CREATED", "RESOURCES"}, rows); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nScheduling decisions: %d\n", len(h.Decisions))
	if len(h.Decisions) > 0 {
		rows := make([][]string, 0, len(h.Decisions))
		for _, d := range h.Decisions {
			rows = append(rows, []string{strconv.FormatInt(d.PolicyGeneration, 10), d.Cluster, d.Action,
				score(d.AffinityScore), score(d.TopologySpreadScore), timestamp(d.DecidedAt), oneLine(d.Reason)})
		}
		if err := p.indentedTable(w, []string{"POLICY-GEN", "CLUSTER", "ACTION", "AFFINITY", "TOPOLOGY", "DECIDED", "REASON"}, rows); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nStatus transitions: %d\n", len(h.Status))
	if len(h.Status) > 0 {
		rows := make([][]string, 0, len(h.Status))
		for _, c := range h.Status {
			cluster := c.Cluster
			if cluster == "" {
				cluster = "-"
			}
			rows = append(rows, []string{timestamp(c.At), cluster, c.Type, c.Status, c.Reason, oneLine(c.Message)})
		}
		if err := p.indentedTable(w, []string{"AT", "CLUSTER", "TYPE", "STATUS", "REASON", "MESSAGE"}, rows); err != nil {
			return err
		}
	}

	// Only placements that failed over have failover steps.
	if len(h.Failovers) > 0 {
		fmt.Fprintf(w, "\nFailovers: %d\n", len(h.Failovers))
		rows := make([][]string, 0, len(h.Failovers))
		for _, f := range h.Failovers {
			to := f.To
			if to == "" {
				to = "-"
			}
			rows = append(rows, []string{timestamp(f.At), f.Kind, f.From, to, oneLine(f.Message)})
		}
		if err := p.indentedTable(w, []string{"AT", "STEP", "FROM", "TO", "MESSAGE"}, rows); err != nil {
			return err
		}
	}

	// Only External placements have runs: the others' history stays as it was.
	if len(h.Runs) > 0 || h.RunsSkipped > 0 {
		fmt.Fprintf(w, "\nStaged update runs: %s\n", runsPage(h))
		rows := make([][]string, 0, len(h.Runs))
		for _, r := range h.Runs {
			name, ended := r.Name, "-"
			if r.Deleted {
				name += " (deleted)"
			}
			if r.EndedAt != nil {
				ended = timestamp(*r.EndedAt)
			}
			clusters := strings.Join(r.Clusters, ",")
			if clusters == "" {
				clusters = "-"
			}
			rows = append(rows, []string{name, r.ResourceIndex, r.Strategy, r.Outcome, clusters, timestamp(r.CreatedAt), ended, oneLine(r.Message)})
		}
		if err := p.indentedTable(w, []string{"RUN", "INDEX", "STRATEGY", "OUTCOME", "UPDATED", "CREATED", "ENDED", "MESSAGE"}, rows); err != nil {
			return err
		}
	}
	return nil
}

// runsPage says which runs a history shows, and how to see those it leaves out.
func runsPage(h *events.PlacementHistory) string {
	n := len(h.Runs)
	if h.RunsSkipped == 0 && h.RunsLeftOut == 0 {
		return strconv.Itoa(n)
	}
	page := fmt.Sprintf("%d, the newest", n)
	if h.RunsSkipped > 0 {
		page = fmt.Sprintf("%d, after the newest %d", n, h.RunsSkipped)
	}
	if h.RunsLeftOut > 0 {
		page += fmt.Sprintf("; %d older left out: fleetctl history crp %s --skip-runs %d shows the next", h.RunsLeftOut, h.Placement, h.RunsSkipped+n)
	}
	return page
}

// Takeovers prints takeover decisions, with the differing fields of the
// refused ones.
func (p Printer) Takeovers(w io.Writer, records []events.TakeoverRecord) error {
	if p.Output.Format != Table && p.Output.Format != Wide {
		if records == nil {
			records = []events.TakeoverRecord{}
		}
		return printStructured(w, p.Output, records)
	}
	rows := make([][]string, 0, len(records))
	for _, r := range records {
		diffs := make([]string, 0, len(r.Diffs))
		for _, d := range r.Diffs {
			diffs = append(diffs, Patch(d))
		}
		rows = append(rows, []string{timestamp(r.DecidedAt), r.Placement, r.Cluster, Resource(r.Resource),
			string(r.Mode), string(r.Comparison), r.Outcome, strings.Join(diffs, "; ")})
	}
	return p.table(w, []string{"DECIDED", "PLACEMENT", "CLUSTER", "OBJECT", "MODE", "COMPARISON", "OUTCOME", "DIFFS"}, rows)
}

func (p Printer) indentedTable(w io.Writer, columns []string, rows [][]string) error {
	ind := func(r []string) []string {
		out := append([]string(nil), r...)
		out[0] = "  " + out[0]
		return out
	}
	indented := make([][]string, 0, len(rows))
	for _, r := range rows {
		indented = append(indented, ind(r))
	}
	return p.table(w, ind(columns), indented)
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC3339)
}

func shortHash(h string, full bool) string {
	if !full && len(h) > 12 {
		return h[:12]
	}
	return h
}

func score(s *int32) string {
	if s == nil {
		return "-"
	}
	return strconv.Itoa(int(*s))
}
