package observe_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Paths of the dashboard and the alert rules, from this package.
const (
	dashboardPath = "../../deploy/grafana/flotilla.json"
	alertsPath    = "../../deploy/prometheus/alerts.yaml"
)

// metricName finds the metrics a PromQL expression reads.
var metricName = regexp.MustCompile(`\b(flotilla_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)

// alertRules is the Prometheus rule file format.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// dashboard is what a Grafana dashboard's panels query.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// deployQueries reads the alert rules and the dashboard, checks their shape,
// and returns every expression in them, by where it is.
func deployQueries(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: rule %q needs alert, expr, a severity label, a summary and a description", alertsPath, r.Alert)
			}
			alerts = append(alerts, r.Alert)
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	for _, want := range []string{"FlotillaPlacementNotAvailable", "FlotillaEventsDeadLettered", "FlotillaOutboxBacklogOld"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("%s has no alert %s (it has %v)", alertsPath, want, alerts)
		}
	}

	raw, err = os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Errorf("%s: a dashboard needs a title, a uid and panels", dashboardPath)
	}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q queries nothing", dashboardPath, p.Title)
		}
		for i, target := range p.Targets {
			exprs[fmt.Sprintf("panel %q, query %d", p.Title, i+1)] = target.Expr
		}
	}
	return exprs
}

// checkDeployQueries fails t for each metric the alert rules or the dashboard
// read that is not in exported.
func checkDeployQueries(t *testing.T, exported map[string]bool) {
	t.Helper()
	for where, expr := range deployQueries(t) {
		names := metricName.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s reads no metric: %s", where, expr)
		}
		for _, name := range names {
			if !exported[name] {
				t.Errorf("%s reads %s, which no service exports", where, name)
			}
		}
	}
}

// TestDeployQueriesParse checks the dashboard and alert rules alone, fast.
func TestDeployQueriesParse(t *testing.T) {
	if n := len(deployQueries(t)); n < 10 {
		t.Errorf("%d queries in the dashboard and alert rules, want a dozen or so", n)
	}
}
