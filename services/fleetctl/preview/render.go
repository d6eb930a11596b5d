package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Write renders r as format: "table" (or ""), "yaml" or "json".
// Secret values (the file's own, or a member's in a diff) are shown as api.Redacted.
func Write(w io.Writer, r *Result, format string) error {
	r, err := redacted(r)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		data, err := yaml.Marshal(r)
		if err != nil {
			return fmt.Errorf("render the preview: %w", err)
		}
		_, err = w.Write(data)
		return err
	case "", "table":
		return table(w, r)
	}
	return fmt.Errorf("unknown output format %q for a preview; use table, yaml or json", format)
}

// table is the human view: per placement, the scheduling decision, the
// rollout plan, what happens to each object on each member (with its diff),
// and the manifests after overrides, clusters with the same ones together.
func table(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, p := range r.Placements {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "ClusterResourcePlacement %s (dry run: nothing was changed)\n", p.Name)
		scheduling(tw, p.Scheduling)
		if p.Rollout != nil {
			rolloutPlan(tw, &p.Rollout.Plan)
		}
		objects(tw, p.Members)
		if p.Rollout != nil {
			if err := manifests(tw, p.Rollout); err != nil {
				return err
			}
		}
	}
	if len(r.Partial) > 0 {
		fmt.Fprintf(tw, "\nPARTIAL: %d member(s) did not answer in time, their objects are missing: %s\n",
			len(r.Partial), strings.Join(r.Partial, ", "))
	}
	return tw.Flush()
}

func scheduling(w io.Writer, s *events.SchedulingPreview) {
	fmt.Fprintf(w, "\nScheduling: %s: %s\n", s.Reason, s.Message)
	fmt.Fprintln(w, "CLUSTER\tPICKED\tAFFINITY\tSPREAD\tWHY")
	for _, c := range s.Chosen {
		why := "newly picked"
		if c.Action == "kept" {
			why = "already there (scheduling is sticky)"
		}
		fmt.Fprintf(w, "%s\tyes\t%d\t%d\t%s\n", c.Cluster, c.AffinityScore, c.TopologySpreadScore, why)
	}
	for _, c := range s.Removed {
		fmt.Fprintf(w, "%s\tremoved\t\t\t%s\n", c.Cluster, oneLine(c.Message))
	}
	for _, c := range s.NotChosen {
		fmt.Fprintf(w, "%s\tno\t\t\t%s\n", c.Cluster, oneLine(c.Message))
	}
}

func rolloutPlan(w io.Writer, p *events.RolloutPlan) {
	fmt.Fprintf(w, "\nRollout: %s", p.Type)
	if p.Type == string(api.RollingUpdateRolloutStrategyType) {
		fmt.Fprintf(w, " (maxUnavailable %d, maxSurge %d)", p.MaxUnavailable, p.MaxSurge)
	}
	fmt.Fprintln(w)
	if p.Note != "" {
		fmt.Fprintf(w, "  %s\n", p.Note)
	}
	steps, label := p.Batches, "BATCH"
	if len(p.Stages) > 0 {
		steps, label = p.Stages, "STAGE"
	}
	if len(steps) > 0 {
		fmt.Fprintf(w, "%s\tCLUSTERS\n", label)
	}
	for _, b := range steps {
		names := make([]string, len(b.Clusters))
		for i, c := range b.Clusters {
			names[i] = c.Cluster + " (" + c.Action + ")"
		}
		fmt.Fprintf(w, "%s\t%s\n", b.Name, strings.Join(names, ", "))
	}
	for _, c := range slices.Sorted(maps.Keys(p.Waiting)) {
		fmt.Fprintf(w, "waiting\t%s: %s\n", c, p.Waiting[c])
	}
}

func objects(w io.Writer, members []Member) {
	fmt.Fprintln(w, "\nOn the members (server-side dry run):")
	fmt.Fprintln(w, "CLUSTER\tOBJECT\tOUTCOME\tDETAIL")
	for _, m := range members {
		if m.Error != "" {
			outcome := "Error"
			if m.NoAnswer {
				outcome = "NoAnswer"
			}
			fmt.Fprintf(w, "%s\t-\t%s\t%s\n", m.Cluster, outcome, oneLine(m.Error))
			continue
		}
		if len(m.Objects) == 0 {
			fmt.Fprintf(w, "%s\t-\tNoObjects\tthe placement selects nothing\n", m.Cluster)
		}
		for _, o := range m.Objects {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Cluster, objectName(o.ResourceIdentifier), o.Outcome, oneLine(o.Message))
			for _, d := range o.Diffs {
				fmt.Fprintf(w, "\t\t\t  %s: member %s, hub %s\n", d.Path, orNone(d.ValueInMember), orNone(d.ValueInHub))
			}
		}
	}
}

// manifests prints each distinct set of manifests once, naming the clusters
// that would get it and the overrides that made it.
func manifests(w io.Writer, r *events.RolloutPreview) error {
	type group struct {
		clusters  []string
		overrides []string
		body      string
	}
	var groups []*group
	byBody := map[string]*group{}
	for _, c := range r.Clusters {
		if c.Error != "" {
			continue
		}
		var b strings.Builder
		for _, m := range c.Manifests {
			data, err := yaml.JSONToYAML(m)
			if err != nil {
				return fmt.Errorf("render the manifests of %s: %w", c.Cluster, err)
			}
			b.WriteString("---\n")
			b.Write(data)
		}
		key := b.String() + "\x00" + strings.Join(c.Overrides, ",")
		g := byBody[key]
		if g == nil {
			g = &group{body: b.String(), overrides: c.Overrides}
			byBody[key] = g
			groups = append(groups, g)
		}
		g.clusters = append(g.clusters, c.Cluster)
	}
	fmt.Fprintf(w, "\nManifests after overrides (%d resource(s) selected):\n", len(r.Resources))
	for _, g := range groups {
		fmt.Fprintf(w, "# clusters: %s\n", strings.Join(g.clusters, ", "))
		if len(g.overrides) > 0 {
			fmt.Fprintf(w, "# overrides: %s\n", strings.Join(g.overrides, ", "))
		}
		fmt.Fprint(w, g.body)
	}
	return nil
}

func objectName(id api.ResourceIdentifier) string {
	gv := id.Version
	if id.Group != "" {
		gv = id.Group + "/" + id.Version
	}
	name := id.Name
	if id.Namespace != "" {
		name = id.Namespace + "/" + id.Name
	}
	return gv + " " + id.Kind + " " + name
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// redacted is r with every Secret value in it (manifests, envelopes, differences) replaced
// by api.Redacted, as everywhere else Flotilla shows an object: a preview is printed, and
// pasted into tickets.
func redacted(r *Result) (*Result, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("render the preview: %w", err)
	}
	data, changed := api.RedactSecrets(data)
	if !changed {
		return r, nil
	}
	var out Result
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("render the preview: %w", err)
	}
	return &out, nil
}
