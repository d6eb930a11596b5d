package api

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const crpHeader = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp
`

// decodeErrors decodes input and returns the field errors of its one failed document.
func decodeErrors(t *testing.T, input string) (*DocumentError, ErrorList) {
	t.Helper()
	docs, err := DecodeAll(strings.NewReader(input))
	if err == nil {
		t.Fatalf("decoded %d documents, want an error", len(docs))
	}
	var de *DocumentError
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *DocumentError", err)
	}
	var list ErrorList
	errors.As(err, &list)
	return de, list
}

func TestDecodeReportsUnknownFieldsWithPathLineAndSuggestion(t *testing.T) {
	tests := []struct {
		name, body string
		want       []FieldError
	}{
		{
			name: "typo in policy",
			body: "spec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: a}]\n  policy:\n    placementTyp: PickN\n",
			want: []FieldError{{Type: ErrorTypeUnknownField, Field: "spec.policy.placementTyp", Detail: `unknown field; did you mean "placementType"?`, Line: 8}},
		},
		{
			name: "plural comparisonOptions from the docs' prose",
			body: "spec:\n  strategy:\n    applyStrategy:\n      comparisonOptions: fullComparison\n",
			want: []FieldError{{Type: ErrorTypeUnknownField, Field: "spec.strategy.applyStrategy.comparisonOptions", Detail: `unknown field; did you mean "comparisonOption"?`, Line: 8}},
		},
		{
			name: "inside a list, several at once",
			body: "spec:\n  resourceSelectors:\n  - group: ''\n    verison: v1\n    kind: Namespace\n    zzz: 1\n",
			want: []FieldError{
				{Type: ErrorTypeUnknownField, Field: "spec.resourceSelectors[0].verison", Detail: `unknown field; did you mean "version"?`, Line: 8},
				{Type: ErrorTypeUnknownField, Field: "spec.resourceSelectors[0].zzz", Detail: "unknown field", Line: 10},
			},
		},
		{
			name: "wrong case of a key",
			body: "spec:\n  ResourceSelectors: []\n",
			want: []FieldError{{Type: ErrorTypeUnknownField, Field: "spec.ResourceSelectors", Detail: `unknown field; did you mean "resourceSelectors"?`, Line: 6}},
		},
		{
			name: "in metadata",
			body: "  lables: {a: b}\n",
			want: []FieldError{{Type: ErrorTypeUnknownField, Field: "metadata.lables", Detail: `unknown field; did you mean "labels"?`, Line: 5}},
		},
		{
			name: "duplicate key",
			body: "spec:\n  revisionHistoryLimit: 3\n  revisionHistoryLimit: 4\n",
			want: []FieldError{{Type: ErrorTypeDuplicate, Field: "spec.revisionHistoryLimit", Detail: "appears twice (first on line 6)", Line: 7}},
		},
		{
			name: "wrong shapes",
			body: "spec:\n  resourceSelectors: {group: ''}\n  policy:\n    numberOfClusters: \"3\"\n    clusterNames: [1]\n  strategy: RollingUpdate\n",
			want: []FieldError{
				{Type: ErrorTypeWrongType, Field: "spec.resourceSelectors", Detail: "must be a list, not an object", Line: 6},
				{Type: ErrorTypeWrongType, Field: "spec.policy.numberOfClusters", Detail: `must be an integer, not the string "3"`, Line: 8},
				{Type: ErrorTypeWrongType, Field: "spec.policy.clusterNames[0]", Detail: `must be a string, not the number 1; write it in quotes: "1"`, Line: 9},
				{Type: ErrorTypeWrongType, Field: "spec.strategy", Detail: `must be an object, not the string "RollingUpdate"`, Line: 10},
			},
		},
		{
			name: "bad quantity-like scalars",
			body: "status:\n  conditions:\n  - type: X\n    status: \"True\"\n    reason: R\n    message: m\n    lastTransitionTime: yesterday\n",
			want: []FieldError{{Type: ErrorTypeWrongType, Field: "status.conditions[0].lastTransitionTime",
				Detail: `must be a time such as 2024-01-02T15:04:05Z, not the string "yesterday"`, Line: 11}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			de, list := decodeErrors(t, crpHeader+tt.body)
			if de.Index != 0 || de.Kind != "ClusterResourcePlacement" || de.Name != "crp" {
				t.Errorf("document error = %+v", de)
			}
			var got []FieldError
			for _, e := range list {
				got = append(got, *e)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestUnknownFieldMessageStartsWithPath(t *testing.T) {
	_, err := Decode([]byte(crpHeader + "spec:\n  policy:\n    placementTyp: PickN\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.policy.placementTyp: unknown field") {
		t.Fatalf("error = %v, want it to name spec.policy.placementTyp", err)
	}
}

func TestDecodeAllMultiDocumentIndexes(t *testing.T) {
	input := `# leading comment
---
apiVersion: v1
kind: Namespace
metadata:
  name: app
---
# an empty document is skipped
---
` + crpHeader + `spec:
  policy:
    placementTyp: PickN
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: member-1
spec:
  heartbeatPeriodSeconds: 30
---
metadata:
  name: no-type
`
	docs, err := DecodeAll(strings.NewReader(input))
	if len(docs) != 2 {
		t.Fatalf("decoded %d documents, want the 2 good ones", len(docs))
	}
	if docs[0].Index != 0 || docs[0].Line != 3 || docs[1].Index != 2 || docs[1].Line != 18 {
		t.Errorf("documents at (index, line) (%d, %d) and (%d, %d), want (0, 3) and (2, 18)", docs[0].Index, docs[0].Line, docs[1].Index, docs[1].Line)
	}
	if _, ok := docs[1].Object.(*MemberCluster); !ok {
		t.Errorf("document 2 is %T", docs[1].Object)
	}
	want := []string{
		"document 2 (ClusterResourcePlacement crp, starting at line 10): spec.policy.placementTyp: unknown field; did you mean \"placementType\"? (line 16)",
		"document 4 (starting at line 25): 2 problems:",
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\nlacks %q", err, w)
		}
	}
	var indexes []int
	for _, e := range unwrapAll(err) {
		var de *DocumentError
		if errors.As(e, &de) {
			indexes = append(indexes, de.Index)
		}
	}
	if !slices.Equal(indexes, []int{1, 3}) {
		t.Errorf("failed document indexes = %v, want [1 3]", indexes)
	}
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestDecodeAllSyntaxErrorCarriesIndex(t *testing.T) {
	input := "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [\n"
	docs, err := DecodeAll(strings.NewReader(input))
	var de *DocumentError
	if !errors.As(err, &de) || de.Index != 1 || !strings.Contains(err.Error(), "document 2: yaml: line 6") {
		t.Fatalf("error = %v, want a syntax error in document 2", err)
	}
	if len(docs) != 1 {
		t.Errorf("decoded %d documents before the error, want 1", len(docs))
	}
}

func TestDecodeJSON(t *testing.T) {
	input := `{"apiVersion": "placement.kubernetes-fleet.io/v1beta1", "kind": "ClusterResourcePlacement",
 "metadata": {"name": "a"}, "spec": {"resourceSelectors": [{"group": "", "version": "v1", "kind": "Namespace", "name": "x"}],
 "policy": {"placementType": "pickn", "numberOfClusters": 2}}}
{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}, "data": {"k": "v"}}
{"apiVersion": "cluster.kubernetes-fleet.io/v1beta1", "kind": "MemberCluster",
 "metadata": {"name": "m"}, "spec": {"heartbeatPeriod": 5}}`
	docs, err := DecodeAll(strings.NewReader(input))
	if len(docs) != 2 {
		t.Fatalf("decoded %d documents, want 2", len(docs))
	}
	crp := docs[0].Object.(*ClusterResourcePlacement)
	if crp.Spec.Policy.PlacementType != PickNPlacementType || *crp.Spec.Policy.NumberOfClusters != 2 {
		t.Errorf("policy = %+v", crp.Spec.Policy)
	}
	if cm := docs[1].Object.(*unstructured.Unstructured); cm.GetName() != "c" || docs[1].Line != 4 {
		t.Errorf("second object %s at line %d", cm.GetName(), docs[1].Line)
	}
	if err == nil || !strings.Contains(err.Error(), `document 3 (MemberCluster m, starting at line 5): spec.heartbeatPeriod: unknown field; did you mean "heartbeatPeriodSeconds"? (line 6)`) {
		t.Errorf("error = %v", err)
	}
}

func TestDecodeReadsEnumsCaseInsensitively(t *testing.T) {
	obj, err := Decode([]byte(crpHeader + `spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: a}]
  policy:
    placementType: pickn
    numberOfClusters: 1
    tolerations: [{key: k, operator: exists, effect: noschedule}]
    topologySpreadConstraints: [{topologyKey: zone, whenUnsatisfiable: scheduleanyway}]
    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
          - propertySelector:
              matchExpressions: [{name: kubernetes-fleet.io/node-count, operator: GE, values: ["3"]}]
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 10
          preference: {propertySorter: {name: resources.kubernetes-fleet.io/available-cpu, sortOrder: descending}}
  strategy:
    type: rollingupdate
    applyStrategy: {type: serverSideApply, comparisonOption: FULLCOMPARISON, whenToApply: ifnotdrifted, whenToTakeOver: ifnodiff}
    deleteStrategy: {propagationPolicy: abandon}
`))
	if err != nil {
		t.Fatal(err)
	}
	crp := obj.(*ClusterResourcePlacement)
	p, s := crp.Spec.Policy, crp.Spec.Strategy
	got := []string{
		string(p.PlacementType), string(p.Tolerations[0].Operator), string(p.Tolerations[0].Effect),
		string(p.TopologySpreadConstraints[0].WhenUnsatisfiable),
		string(p.Affinity.ClusterAffinity.RequiredDuringSchedulingIgnoredDuringExecution.ClusterSelectorTerms[0].PropertySelector.MatchExpressions[0].Operator),
		string(p.Affinity.ClusterAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Preference.PropertySorter.SortOrder),
		string(s.Type), string(s.ApplyStrategy.Type), string(s.ApplyStrategy.ComparisonOption),
		string(s.ApplyStrategy.WhenToApply), string(s.ApplyStrategy.WhenToTakeOver), string(s.DeleteStrategy.PropagationPolicy),
	}
	want := []string{"PickN", "Exists", "NoSchedule", "ScheduleAnyway", "Ge", "Descending",
		"RollingUpdate", "ServerSideApply", "FullComparison", "IfNotDrifted", "IfNoDiff", "Abandon"}
	if !slices.Equal(got, want) {
		t.Errorf("enums = %v, want %v", got, want)
	}
	if errs := Validate(crp); len(errs) > 0 {
		t.Errorf("normalised placement is invalid: %v", errs)
	}
}

func TestDecodeLeavesUnknownEnumValuesForValidate(t *testing.T) {
	obj, err := Decode([]byte(crpHeader + "spec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace}]\n  policy: {placementType: PickSome}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`spec.policy.placementType: "PickSome" is not supported; use PickAll, PickN or PickFixed`}
	if got := Validate(obj).Fields(); !slices.Equal(got, want) {
		t.Errorf("validation = %q, want %q", got, want)
	}
}

// The normalisation pass repairs the shape slips of the Fleet PickN example
// at their known paths only.
func TestDecodeNormalisesKnownShapeSlips(t *testing.T) {
	obj, err := DecodeAll(strings.NewReader(crpHeader + `spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, labelSelector: {matchLabels: {tier: 1}, matchExpressions: [{key: gen, operator: In, values: [2, true]}]}}
  policy:
    placementType: PickN
    numberOfClusters: 1
    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
          - propertySelector: {matchExpressions: [{name: kubernetes-fleet.io/node-count, operator: Gt, values: [3]}]}
        preferredDuringSchedulingIgnoredDuringExecution:
          weight: 20
          preference:
          - labelSelector:
              matchLabels:
                critical-level: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	crp := obj[0].Object.(*ClusterResourcePlacement)
	sel := crp.Spec.ResourceSelectors[0].LabelSelector
	aff := crp.Spec.Policy.Affinity.ClusterAffinity
	got := []string{
		sel.MatchLabels["tier"], sel.MatchExpressions[0].Values[0], sel.MatchExpressions[0].Values[1],
		aff.RequiredDuringSchedulingIgnoredDuringExecution.ClusterSelectorTerms[0].PropertySelector.MatchExpressions[0].Values[0],
		aff.PreferredDuringSchedulingIgnoredDuringExecution[0].Preference.LabelSelector.MatchLabels["critical-level"],
	}
	if !slices.Equal(got, []string{"1", "2", "true", "3", "1"}) {
		t.Errorf("normalised values = %q", got)
	}
	wantWarnings := []string{
		`spec.resourceSelectors[0].labelSelector.matchLabels[tier]: label values are strings; read 1 as "1"`,
		`spec.resourceSelectors[0].labelSelector.matchExpressions[0].values[0]: label values are strings; read 2 as "2"`,
		`spec.resourceSelectors[0].labelSelector.matchExpressions[0].values[1]: label values are strings; read true as "true"`,
		`spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[0].values[0]: property values are strings; read 3 as "3"`,
		"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution: expected a list; read the single object as a one-element list",
		"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference: expected an object; read the one-element list as its only element",
		`spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.labelSelector.matchLabels[critical-level]: label values are strings; read 1 as "1"`,
	}
	if !slices.Equal(obj[0].Warnings, wantWarnings) {
		t.Errorf("warnings:\n got %q\nwant %q", obj[0].Warnings, wantWarnings)
	}
}

// Only the known paths are loosened: the same slips elsewhere stay errors.
func TestDecodeDoesNotLoosenOtherPaths(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"object for the required terms list",
			"spec:\n  policy:\n    affinity:\n      clusterAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          clusterSelectorTerms: {labelSelector: {}}\n",
			"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms: must be a list, not an object"},
		{"two-element preference list",
			"spec:\n  policy:\n    affinity:\n      clusterAffinity:\n        preferredDuringSchedulingIgnoredDuringExecution:\n        - weight: 1\n          preference: [{}, {}]\n",
			"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference: must be an object, not a list"},
		{"number as a cluster label in metadata",
			"  labels: {tier: 1}\n",
			`metadata.labels[tier]: must be a string, not the number 1; write it in quotes: "1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, list := decodeErrors(t, crpHeader+tt.body)
			if got := list.Fields(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("errors = %q, want [%q]", got, tt.want)
			}
		})
	}
}

func TestDecodeRecordsPlaceholders(t *testing.T) {
	obj, err := Decode([]byte(crpHeader + "spec:\n  resourceSelectors:\n    - ...\n  policy:\n    ...\n  strategy:\n    applyStrategy: …\n"))
	if err != nil {
		t.Fatal(err)
	}
	crp := obj.(*ClusterResourcePlacement)
	want := []string{"spec.resourceSelectors[0]", "spec.policy", "spec.strategy.applyStrategy"}
	if !slices.Equal(crp.Placeholders, want) {
		t.Errorf("placeholders = %q, want %q", crp.Placeholders, want)
	}
	if len(crp.Spec.ResourceSelectors) != 0 || crp.Spec.Policy != nil || crp.Spec.Strategy.ApplyStrategy != nil {
		t.Errorf("placeholders left values behind: %+v", crp.Spec)
	}
	// A quoted "..." is a value the user meant, not a placeholder.
	if _, err := Decode([]byte(crpHeader + "spec:\n  policy: '...'\n")); err == nil {
		t.Error("a quoted \"...\" for an object decoded without error")
	}
}

func TestDecodeMissingTypeInformation(t *testing.T) {
	tests := []struct{ input, want string }{
		{"metadata: {name: a}\n", "document 1 (starting at line 1): 2 problems:\n  apiVersion: is missing; every manifest needs apiVersion and kind"},
		{"apiVersion: v1\nmetadata: {name: a}\n", "document 1 (starting at line 1): kind: is missing"},
		{"apiVersion: v1\nkind: 3\n", "kind: must be a string, not the number 3 (line 2)"},
		{"- a\n- b\n", "document 1 (starting at line 1): a document must be an object with apiVersion and kind, not a list"},
		{"apiVersion: a/b/c\nkind: X\n", `apiVersion: "a/b/c" is not a valid group/version`},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.input))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%q) error = %v, want %q", tt.input, err, tt.want)
		}
	}
}

func TestDecodeRejectsUnsupportedFleetKinds(t *testing.T) {
	tests := []struct{ input, want string }{
		{"apiVersion: placement.kubernetes-fleet.io/v1alpha1\nkind: ClusterResourcePlacement\nmetadata: {name: a}\n",
			"apiVersion: placement.kubernetes-fleet.io/v1alpha1 is not supported for ClusterResourcePlacement; use placement.kubernetes-fleet.io/v1beta1 or placement.kubernetes-fleet.io/v1"},
		{"apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacementStatus\nmetadata: {name: a}\n",
			"kind: ClusterResourcePlacementStatus of placement.kubernetes-fleet.io is not supported by Flotilla (supported: ApprovalRequest, ClusterApprovalRequest, ClusterResourceEnvelope, ClusterResourceOverride, ClusterResourcePlacement, ClusterResourcePlacementDisruptionBudget, ClusterResourcePlacementEviction, ClusterStagedUpdateRun, ClusterStagedUpdateStrategy, ResourceEnvelope, ResourceOverride, ResourcePlacement, StagedUpdateRun, StagedUpdateStrategy)"},
		{"apiVersion: placement.kubernetes-fleet.io/v2\nkind: ClusterResourceOverride\nmetadata: {name: a}\n",
			"apiVersion: placement.kubernetes-fleet.io/v2 is not supported for ClusterResourceOverride; use placement.kubernetes-fleet.io/v1beta1 or placement.kubernetes-fleet.io/v1 or placement.kubernetes-fleet.io/v1alpha1"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.input))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error = %v, want %q", err, tt.want)
		}
	}
}

func TestDecodeHubResourcesAsUnstructured(t *testing.T) {
	obj, err := Decode([]byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: app
  labels: {tier: "1"}
spec:
  replicas: 2
  paused: yes
  template:
    spec:
      containers: [{name: c, image: nginx, anything: goes}]
`))
	if err != nil {
		t.Fatal(err)
	}
	u := obj.(*unstructured.Unstructured)
	replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused")
	if u.GetName() != "web" || u.GetNamespace() != "app" || replicas != 2 || !paused {
		t.Errorf("decoded %v", u.Object)
	}
	// Duplicate keys are an error even in free-form manifests.
	_, err = Decode([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: a\n  k: b\n"))
	if err == nil || !strings.Contains(err.Error(), "data.k: appears twice (first on line 5) (line 6)") {
		t.Errorf("error = %v", err)
	}
}

func TestDecodeKeepsYAML11WordsInStringFields(t *testing.T) {
	obj, err := Decode([]byte(crpHeader + "spec:\n  resourceSelectors: [{group: '', version: v1, kind: Namespace, name: yes}]\n  strategy: {applyStrategy: {allowCoOwnership: on}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	crp := obj.(*ClusterResourcePlacement)
	if crp.Spec.ResourceSelectors[0].Name != "yes" || !crp.Spec.Strategy.ApplyStrategy.AllowCoOwnership {
		t.Errorf("name = %q, allowCoOwnership = %v", crp.Spec.ResourceSelectors[0].Name, crp.Spec.Strategy.ApplyStrategy.AllowCoOwnership)
	}
}

func TestDecodeAnchorsAndMergeKeys(t *testing.T) {
	obj, err := Decode([]byte(crpHeader + `spec:
  resourceSelectors:
  - &ns {group: "", version: v1, kind: Namespace, name: a}
  - <<: *ns
    name: b
`))
	if err != nil {
		t.Fatal(err)
	}
	sel := obj.(*ClusterResourcePlacement).Spec.ResourceSelectors
	if len(sel) != 2 || sel[1].Kind != "Namespace" || sel[1].Name != "b" {
		t.Errorf("selectors = %+v", sel)
	}
}

func TestDecodeExpandsLists(t *testing.T) {
	docs, err := DecodeAll(strings.NewReader(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: a}
- ` + strings.ReplaceAll(strings.TrimSpace(crpHeader), "\n", "\n  ") + `
  spec: {bogus: 1}
`))
	if len(docs) != 1 || docs[0].Item != 0 || docs[0].Line != 4 {
		t.Fatalf("documents = %+v", docs)
	}
	if err == nil || !strings.Contains(err.Error(), "document 1, items[1] (ClusterResourcePlacement crp, starting at line 7): spec.bogus: unknown field (line 11)") {
		t.Errorf("error = %v", err)
	}
}

func TestDecodeOneDocument(t *testing.T) {
	if _, err := Decode([]byte("# nothing here\n")); err == nil || !strings.Contains(err.Error(), "holds no object") {
		t.Errorf("empty input: error = %v", err)
	}
	two := "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"
	if _, err := Decode([]byte(two)); err == nil || !strings.Contains(err.Error(), "expected one object, found 2") {
		t.Errorf("two documents: error = %v", err)
	}
}

func TestDecodeReplacesNonBreakingSpaces(t *testing.T) {
	input := "apiVersion: v1\nkind: Namespace\nmetadata:\n\u00a0 name: a\u00a0\u00a0\n\u00a0 labels:\n\u00a0\u00a0\u00a0 x: \"in\u00a0value\"\n"
	docs, err := DecodeAll(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	u := docs[0].Object.(*unstructured.Unstructured)
	if u.GetName() != "a" || u.GetLabels()["x"] != "in\u00a0value" {
		t.Errorf("name %q labels %q", u.GetName(), u.GetLabels())
	}
	if want := []string{"non-breaking spaces (U+00A0) around the text were read as spaces on lines 4-6"}; !slices.Equal(docs[0].Warnings, want) {
		t.Errorf("warnings = %q, want %q", docs[0].Warnings, want)
	}
}

func TestDecodeTypedKinds(t *testing.T) {
	input := `apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: member-1
  labels: {region: east}
spec:
  identity: {kind: ServiceAccount, name: fleet-member-agent, namespace: fleet-system}
  taints: [{key: maintenance, value: "true", effect: noSchedule}]
status:
  properties:
    kubernetes-fleet.io/node-count: {value: "3", observationTime: "2024-05-01T10:00:00Z"}
  resourceUsage:
    allocatable: {cpu: 3800m, memory: 15Gi}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata: {name: env, namespace: app}
data:
  cm.yaml:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: inner}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourceEnvelope
metadata: {name: cenv}
data:
  role.yaml: {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: r}}
---
apiVersion: core.kubeadmiral.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: cpp}
spec:
  schedulingMode: divide
  maxClusters: 2
  placement: [{cluster: a, preferences: {minReplicas: 1, maxReplicas: 3}}]
`
	docs, err := DecodeAll(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	mc := docs[0].Object.(*MemberCluster)
	cpu := mc.Status.ResourceUsage.Allocatable["cpu"]
	if mc.Spec.Taints[0].Effect != TaintEffectNoSchedule || mc.Spec.Identity.Name != "fleet-member-agent" ||
		mc.Status.Properties[NodeCountProperty].Value != "3" || cpu.MilliValue() != 3800 {
		t.Errorf("member cluster = %+v", mc)
	}
	if env := docs[1].Object.(*ResourceEnvelope); len(env.Data) != 1 {
		t.Errorf("envelope data = %v", env.Data)
	}
	if _, ok := docs[2].Object.(*ClusterResourceEnvelope); !ok {
		t.Errorf("document 3 is %T", docs[2].Object)
	}
	if cpp := docs[3].Object.(*ClusterPropagationPolicy); cpp.Spec.SchedulingMode != SchedulingModeDivide || *cpp.Spec.Placements[0].Preferences.MaxReplicas != 3 {
		t.Errorf("policy = %+v", cpp.Spec)
	}
	for _, d := range docs {
		if errs := Validate(d.Object); len(errs) > 0 {
			t.Errorf("%T invalid: %v", d.Object, errs)
		}
	}
}

func TestDocumentErrorMessage(t *testing.T) {
	err := &DocumentError{Index: 2, Item: -1, Line: 14, Kind: "ClusterResourcePlacement", Name: "crp",
		Err: ErrorList{{Field: "spec.policy.placementTyp", Detail: "unknown field", Line: 17}}}
	want := "document 3 (ClusterResourcePlacement crp, starting at line 14): spec.policy.placementTyp: unknown field (line 17)"
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Errorf("errors.As could not reach the ErrorList")
	}
	if (ErrorList{}).ToError() != nil {
		t.Error("empty ErrorList.ToError() is not nil")
	}
}

// placement.kubernetes-fleet.io/v1 and cluster.kubernetes-fleet.io/v1 read as v1beta1 does,
// and the objects keep the version written.
func TestDecodeV1KindsKeepTheirVersion(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: placement.kubernetes-fleet.io/v1\nkind: ClusterResourcePlacement\nmetadata: {name: a}\nspec:\n  resourceSelectors: [{group: \"\", version: v1, kind: Namespace, name: app}]\n  policy: {placementType: PickN, numberOfClusters: 2}\n",
		"apiVersion: cluster.kubernetes-fleet.io/v1\nkind: MemberCluster\nmetadata: {name: member-1, labels: {region: east}}\nspec: {heartbeatPeriodSeconds: 30}\n",
		"apiVersion: placement.kubernetes-fleet.io/v1\nkind: ResourceEnvelope\nmetadata: {name: e, namespace: app}\ndata:\n  cm.yaml: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n",
	} {
		obj, err := Decode([]byte(doc))
		if err != nil {
			t.Errorf("Decode: %v\n%s", err, doc)
			continue
		}
		if errs := Validate(obj); len(errs) > 0 {
			t.Errorf("Validate: %v", errs)
		}
		if got := obj.GetObjectKind().GroupVersionKind().Version; got != "v1" {
			t.Errorf("%T has version %q, want v1 as written", obj, got)
		}
	}
}
