package hubsync

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/harness/seeds"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

// request is an AdmissionRequest for the object in manifest (YAML), as the API server sends
// it: JSON.
func request(t *testing.T, op admissionv1.Operation, manifest, old string) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(s string) runtime.RawExtension {
		if s == "" {
			return runtime.RawExtension{}
		}
		data, err := yaml.YAMLToJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal([]byte(manifest), &meta)
	return &admissionv1.AdmissionRequest{UID: "1", Operation: op, Name: meta.Metadata.Name,
		Kind: metav1.GroupVersionKind{Kind: meta.Kind}, Object: raw(manifest), OldObject: raw(old)}
}

// TestWebhookGivesFleetctlsErrors: every invalid document fleetctl's tests refuse is refused
// at admission with the same field paths and words.
func TestWebhookGivesFleetctlsErrors(t *testing.T) {
	for _, file := range []string{"placement-rules.yaml", "members-and-policies.yaml"} {
		path := filepath.Join("..", "fleetctl", "cli", "testdata", "invalid", file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			t.Run(file+"/"+string(rune('1'+i)), func(t *testing.T) {
				docs, problems := input.Load([]input.Source{{Name: file, Data: []byte(doc)}})
				_, more := change.ForApply(input.WithoutProblems(docs, problems), change.Options{})
				problems = append(problems, more...)
				var want []string
				for _, p := range problems {
					want = append(want, p.Field+": "+p.Detail)
				}
				resp := Review(request(t, admissionv1.Create, doc, ""))
				if resp.Allowed {
					t.Fatalf("allowed; fleetctl refuses it with %v", want)
				}
				if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
					t.Errorf("refused with %d %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
				}
				var got []string
				for _, c := range resp.Result.Details.Causes {
					got = append(got, c.Field+": "+c.Message)
					if !strings.Contains(resp.Result.Message, c.Field+": "+c.Message) {
						t.Errorf("the message kubectl prints lacks %q:\n%s", c.Field+": "+c.Message, resp.Result.Message)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("causes\n  %s\nfleetctl says\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
			})
		}
	}
}

// seed is a seed's block as a user's file holds it: the English seed's block was copied from
// a web page with non-breaking spaces for indentation, which kubectl's YAML parser (unlike
// fleetctl's) does not read as spaces.
func seed(t *testing.T, name string) string {
	return strings.ReplaceAll(seeds.Read(t, name), "\u00a0", " ")
}

// TestWebhookAcceptsTheSeeds: the seeds' placements, as written (comparisonOption
// partialComparison included), are admitted; what fleetctl reads differently is a warning.
func TestWebhookAcceptsTheSeeds(t *testing.T) {
	for _, name := range []string{"000-1.yaml", "000-2.yaml", "002-1.reindented.yaml", "002-2.reindented.yaml"} {
		resp := Review(request(t, admissionv1.Create, seed(t, name), ""))
		if !resp.Allowed {
			t.Errorf("%s refused: %s", name, resp.Result.Message)
		}
		if name == "000-2.yaml" && !slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.Contains(w, "partialComparison") }) {
			t.Errorf("%s: no warning that partialComparison is read as PartialComparison: %q", name, resp.Warnings)
		}
	}
}

// TestWebhookKeepsTheUpdateRules: placementType cannot change on update; tolerations may be
// added.
func TestWebhookKeepsTheUpdateRules(t *testing.T) {
	pickAll := seed(t, "000-1.yaml")
	pickN := strings.Replace(pickAll, "placementType: PickAll", "placementType: PickN\n    numberOfClusters: 2", 1)
	resp := Review(request(t, admissionv1.Update, pickN, pickAll))
	if resp.Allowed || len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != "spec.policy.placementType" {
		t.Errorf("changing placementType: %+v", resp.Result)
	}
	if resp := Review(request(t, admissionv1.Update, seed(t, "000-2.yaml"), pickAll)); !resp.Allowed {
		t.Errorf("the seed's second step (IfNoDiff) refused: %s", resp.Result.Message)
	}
	if resp := Review(request(t, admissionv1.Delete, "", pickAll)); !resp.Allowed {
		t.Errorf("a deletion refused: %s", resp.Result.Message)
	}
}

// TestWebhookServesAdmissionReviews: the HTTP side answers a review with the request's UID.
func TestWebhookServesAdmissionReviews(t *testing.T) {
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: request(t, admissionv1.Create, seed(t, "000-1.yaml"), "")}
	body, _ := json.Marshal(review)
	rec := &responseRecorder{header: http.Header{}}
	req, _ := http.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(body))
	(&webhook{log: discardLogger()}).ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "1" || !out.Response.Allowed {
		t.Errorf("response %s (%v)", rec.body.String(), err)
	}
}

// TestWebhookJudgesResourcePlacements: a ResourcePlacement is judged by upstream's rules (no
// Namespace selectors) and its updates by Fleet's update rules.
func TestWebhookJudgesResourcePlacements(t *testing.T) {
	rp := `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: web, namespace: web}
spec:
  resourceSelectors: [{group: "", version: v1, kind: ConfigMap, name: settings}]
  policy: {placementType: PickAll}
`
	if resp := Review(request(t, admissionv1.Create, rp, "")); !resp.Allowed {
		t.Errorf("a valid ResourcePlacement refused: %s", resp.Result.Message)
	}
	selectsNamespace := strings.Replace(rp, "kind: ConfigMap, name: settings", "kind: Namespace, name: web", 1)
	resp := Review(request(t, admissionv1.Create, selectsNamespace, ""))
	if resp.Allowed || len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != "spec.resourceSelectors[0].kind" {
		t.Errorf("a ResourcePlacement selecting a Namespace: %+v", resp.Result)
	}
	if resp.Result != nil && !strings.HasPrefix(resp.Result.Message, `ResourcePlacement "web" is invalid: `) {
		t.Errorf("refusal %q does not name the ResourcePlacement", resp.Result.Message)
	}
	pickN := strings.Replace(rp, "{placementType: PickAll}", "{placementType: PickN, numberOfClusters: 1}", 1)
	resp = Review(request(t, admissionv1.Update, pickN, rp))
	if resp.Allowed || len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != "spec.policy.placementType" {
		t.Errorf("changing a ResourcePlacement's placementType: %+v", resp.Result)
	}
}
