package preview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// sample is a preview of one placement on two members and one that did not
// answer: a refused takeover with its diff, a creation, and the plan.
func sample() *Result {
	deploy := api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web", Name: "web"}
	manifest := json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":2}}`)
	overridden := json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":5}}`)
	return &Result{
		Placements: []Placement{{
			Name: "web",
			Scheduling: &events.SchedulingPreview{Placement: "web", Fulfilled: true, Reason: "SchedulingPolicyFulfilled",
				Message: "found all cluster needed as specified by the scheduling policy",
				Chosen: []events.PreviewChosen{{Cluster: "member-1", Action: "added", AffinityScore: 10},
					{Cluster: "member-2", Action: "added"}, {Cluster: "member-4", Action: "added"}},
				NotChosen: []events.PreviewNotChosen{{Cluster: "member-3", Reason: "AffinityMismatch",
					Message: "the cluster does not match\nrequired affinity"}}},
			Rollout: &events.RolloutPreview{Placement: "web", Resources: []api.ResourceIdentifier{deploy},
				Clusters: []events.ClusterRender{
					{Cluster: "member-1", Manifests: []json.RawMessage{manifest}},
					{Cluster: "member-2", Manifests: []json.RawMessage{overridden}, Overrides: []string{"replicas-0"}},
					{Cluster: "member-4", Manifests: []json.RawMessage{manifest}},
				},
				Plan: events.RolloutPlan{Type: "RollingUpdate", MaxUnavailable: 1, MaxSurge: 1,
					Batches: []events.RolloutBatch{{Name: "1", Clusters: []events.PlannedAction{
						{Cluster: "member-1", Action: "add"}, {Cluster: "member-2", Action: "add"}}}}}},
			Members: []Member{
				{Cluster: "member-1", Objects: []events.ObjectPreview{{ResourceIdentifier: deploy, Outcome: events.PreviewRefusedTakeOver,
					Message: api.FailedToTakeOverError, Diffs: []api.PatchDetail{{Path: "/spec/replicas", ValueInMember: "3", ValueInHub: "2"}}}}},
				{Cluster: "member-2", Objects: []events.ObjectPreview{{ResourceIdentifier: deploy, Outcome: events.PreviewCreate}}},
				{Cluster: "member-4", NoAnswer: true, Error: "the apply worker of member-4 did not answer within 30s"},
			},
		}},
		Partial: []string{"member-4"},
	}
}

func TestTableShowsEveryPart(t *testing.T) {
	var out bytes.Buffer
	if err := Write(&out, sample(), "table"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"ClusterResourcePlacement web (dry run: nothing was changed)",
		"SchedulingPolicyFulfilled",
		"member-1  yes     10",
		"member-3  no", "the cluster does not match required affinity", // one line
		"Rollout: RollingUpdate (maxUnavailable 1, maxSurge 1)",
		"1      member-1 (add), member-2 (add)",
		"apps/v1 Deployment web/web  RefusedTakeOver",
		"/spec/replicas: member 3, hub 2",
		"apps/v1 Deployment web/web  Create",
		"member-4  -                           NoAnswer",
		"# clusters: member-1, member-4\n",
		"# clusters: member-2\n# overrides: replicas-0\n",
		"replicas: 5",
		"PARTIAL: 1 member(s) did not answer in time, their objects are missing: member-4",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}

func TestJSONAndYAMLCarryTheWholePreview(t *testing.T) {
	want := sample()
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			var out bytes.Buffer
			if err := Write(&out, want, format); err != nil {
				t.Fatal(err)
			}
			data := out.Bytes()
			if format == "yaml" {
				var err error
				if data, err = yaml.YAMLToJSON(data); err != nil {
					t.Fatal(err)
				}
			}
			var got Result
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("%s output does not read back: %v\n%s", format, err, out.String())
			}
			a, _ := json.Marshal(want)
			b, _ := json.Marshal(&got)
			if !bytes.Equal(a, b) {
				t.Errorf("%s output reads back as\n%s\nwant\n%s", format, b, a)
			}
		})
	}
}

func TestUnknownFormat(t *testing.T) {
	if err := Write(&bytes.Buffer{}, sample(), "wide"); err == nil || !strings.Contains(err.Error(), "table, yaml or json") {
		t.Errorf("-o wide: %v", err)
	}
}

// TestSecretValuesAreRedactedInEveryFormat: a Secret in the file, and a member's differing
// Secret, show no value in any output format.
func TestSecretValuesAreRedactedInEveryFormat(t *testing.T) {
	r := sample()
	secret := json.RawMessage(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"web"},` +
		`"data":{"password":"aHVudGVyMg=="},"stringData":{"token":"s3cr3t-token"}}`)
	id := api.ResourceIdentifier{Version: "v1", Kind: "Secret", Namespace: "web", Name: "db"}
	p := &r.Placements[0]
	p.Rollout.Resources = append(p.Rollout.Resources, id)
	p.Rollout.Clusters[0].Manifests = append(p.Rollout.Clusters[0].Manifests, secret)
	p.Members[0].Objects = append(p.Members[0].Objects, events.ObjectPreview{ResourceIdentifier: id, Outcome: events.PreviewUpdate,
		Diffs: []api.PatchDetail{{Path: "/data/password", ValueInMember: "bWVtYmVyLXNlY3JldA==", ValueInHub: "aHVudGVyMg=="}}})
	for _, format := range []string{"table", "json", "yaml"} {
		var out bytes.Buffer
		if err := Write(&out, r, format); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		for _, value := range []string{"aHVudGVyMg==", "s3cr3t-token", "bWVtYmVyLXNlY3JldA=="} {
			if strings.Contains(out.String(), value) {
				t.Errorf("%s output shows the Secret value %q:\n%s", format, value, out.String())
			}
		}
		if !strings.Contains(out.String(), api.Redacted) {
			t.Errorf("%s output does not say the values were redacted", format)
		}
	}
	if !strings.Contains(string(p.Rollout.Clusters[0].Manifests[1]), "aHVudGVyMg==") {
		t.Error("Write changed the result it was given")
	}
}
