package api

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The files under testdata/seeds are the YAML blocks of the product documents
// in the seeds: <seed>-<n>.yaml exactly as the seed shows it, <seed>-<n>.reindented.yaml
// where the seed lost the block's layout (same content, layout restored), and
// <seed>-<n>.completed.yaml where the block is a fragment or holds documentation
// placeholders. Each is decoded, defaulted and validated as fleetctl would.
func TestSeedBlocks(t *testing.T) {
	const (
		placeholder    = `"..." is a placeholder copied from documentation, not a value; replace it with the real content`
		lostIndent     = "lost its indentation"
		lostBreaks     = "lost its line breaks"
		missingVersion = "apiVersion: is missing"
		missingKind    = "kind: is missing"
	)
	tests := []struct {
		file string
		// kinds decoded, in order; nil when decoding must fail.
		kinds []string
		// decodeErr are substrings the decode error must hold.
		decodeErr []string
		// invalid is exactly what Validate reports after SetDefaults.
		invalid []string
		// check inspects the decoded documents further.
		check func(t *testing.T, docs []Document)
	}{
		{file: "000-1.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			crp := docs[0].Object.(*ClusterResourcePlacement)
			as := crp.Spec.Strategy.ApplyStrategy
			if as.WhenToTakeOver != WhenToTakeOverTypeNever || as.ComparisonOption != ComparisonOptionTypePartialComparison {
				t.Errorf("applyStrategy = %+v, want whenToTakeOver Never and the default PartialComparison", as)
			}
			ru := crp.Spec.Strategy.RollingUpdate
			if ru.MaxUnavailable.String() != "100%" || *ru.UnavailablePeriodSeconds != 1 || ru.MaxSurge.String() != "25%" {
				t.Errorf("rollingUpdate = %v %v %v, want 100%%, 1s and the default 25%% surge", ru.MaxUnavailable, *ru.UnavailablePeriodSeconds, ru.MaxSurge)
			}
			if got := crp.Spec.ResourceSelectors[0].LabelSelector.MatchLabels["app"]; got != "web-2" {
				t.Errorf("label selector app = %q, want web-2", got)
			}
			wantWarning(t, docs[0], "non-breaking spaces (U+00A0) around the text were read as spaces")
		}},
		{file: "000-2.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			as := docs[0].Object.(*ClusterResourcePlacement).Spec.Strategy.ApplyStrategy
			if as.WhenToTakeOver != WhenToTakeOverTypeIfNoDiff || as.ComparisonOption != ComparisonOptionTypePartialComparison {
				t.Errorf("applyStrategy = %+v, want IfNoDiff with PartialComparison", as)
			}
			wantWarning(t, docs[0], `spec.strategy.applyStrategy.comparisonOption: read "partialComparison" as "PartialComparison"`)
		}},
		{file: "001-1.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			crp := docs[0].Object.(*ClusterResourcePlacement)
			terms := crp.Spec.Policy.Affinity.ClusterAffinity.RequiredDuringSchedulingIgnoredDuringExecution.ClusterSelectorTerms
			if len(terms) != 1 || terms[0].LabelSelector.MatchLabels["environment"] != "production" {
				t.Errorf("required terms = %+v, want environment=production", terms)
			}
		}},
		{file: "001-2.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			if got := docs[0].Object.(*ClusterResourcePlacement).Spec.Policy.ClusterNames; !slices.Equal(got, []string{"cluster1", "cluster2"}) {
				t.Errorf("clusterNames = %v", got)
			}
		}},
		{file: "001-3.yaml", kinds: []string{"ClusterResourcePlacement"},
			invalid: []string{"spec.resourceSelectors[0]: " + placeholder}},
		{file: "001-3.completed.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			pref := docs[0].Object.(*ClusterResourcePlacement).Spec.Policy.Affinity.ClusterAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			if len(pref) != 1 || pref[0].Weight != 20 || pref[0].Preference.LabelSelector.MatchLabels["critical-level"] != "1" {
				t.Errorf("preferred = %+v, want one term of weight 20 preferring critical-level=1", pref)
			}
			if len(docs[0].Warnings) != 3 {
				t.Errorf("warnings = %q, want the three normalisations", docs[0].Warnings)
			}
		}},
		{file: "001-4.yaml", kinds: []string{"ClusterResourcePlacement"}, invalid: []string{
			"spec.policy.numberOfClusters: required when placementType is PickN",
			"spec.resourceSelectors[0]: " + placeholder,
		}},
		{file: "001-4.completed.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			tsc := docs[0].Object.(*ClusterResourcePlacement).Spec.Policy.TopologySpreadConstraints
			if len(tsc) != 2 || *tsc[1].MaxSkew != 2 || tsc[1].WhenUnsatisfiable != ScheduleAnyway {
				t.Errorf("topologySpreadConstraints = %+v", tsc)
			}
		}},
		{file: "001-5.yaml", kinds: []string{"ClusterResourcePlacement"}, invalid: []string{
			"spec.resourceSelectors[0]: " + placeholder,
			"spec.policy: " + placeholder,
		}},
		{file: "001-5.completed.yaml", kinds: []string{"ClusterResourcePlacement"}},
		{file: "002-1.yaml", decodeErr: []string{"metadata: is empty, and fields that belong inside it (such as name) are at the top level (line 3)", lostIndent}},
		{file: "002-1.reindented.yaml", kinds: []string{"ClusterResourcePlacement"}},
		{file: "002-2.yaml", decodeErr: []string{"metadata: is empty", lostIndent}},
		{file: "002-2.reindented.yaml", kinds: []string{"ClusterResourcePlacement"}},
		{file: "003-1.yaml", decodeErr: []string{missingVersion, missingKind, lostIndent}},
		{file: "003-1.reindented.yaml", decodeErr: []string{missingVersion, missingKind}},
		{file: "003-2.yaml", decodeErr: []string{"ConfigMap", "metadata: is empty", lostIndent}},
		{file: "003-2.reindented.yaml", kinds: []string{"ConfigMap"}, check: func(t *testing.T, docs []Document) {
			manifests, id, err := EnvelopeContents(docs[0].Object)
			if err != nil {
				t.Fatal(err)
			}
			if id != (EnvelopeIdentifier{Name: "envelope-configmap", Namespace: "app", Type: ConfigMapEnvelopeType}) {
				t.Errorf("envelope identifier = %+v", id)
			}
			var kinds []string
			for _, m := range manifests {
				kinds = append(kinds, m.GetKind()+"/"+m.GetName())
			}
			if want := []string{"ResourceQuota/mem-cpu-demo", "MutatingWebhookConfiguration/azure-wi-webhook-mutating-webhook-configuration"}; !slices.Equal(kinds, want) {
				t.Errorf("envelope contents = %v, want %v", kinds, want)
			}
		}},
		{file: "003-3.yaml", decodeErr: []string{missingVersion}},
		{file: "003-3.reindented.yaml", decodeErr: []string{missingVersion, missingKind}},
		{file: "003-3.completed.yaml", kinds: []string{"ClusterResourcePlacement"}},
		{file: "003-4.yaml", decodeErr: []string{"yaml: line 8", lostIndent}},
		{file: "003-4.reindented.yaml", decodeErr: []string{missingVersion, missingKind}},
		{file: "003-4.completed.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			st := docs[0].Object.(*ClusterResourcePlacement).Status
			if len(st.Conditions) != 3 || st.Conditions[1].Message != "All 1 cluster(s) are synchronized to the latest resources on the hub cluster" {
				t.Errorf("conditions = %+v", st.Conditions)
			}
			if len(st.SelectedResources) != 2 || st.SelectedResources[1] != (ResourceIdentifier{Kind: "ConfigMap", Name: "envelope-configmap", Namespace: "app", Version: "v1"}) {
				t.Errorf("selectedResources = %+v", st.SelectedResources)
			}
		}},
		{file: "003-5.yaml", decodeErr: []string{"yaml: line 8", lostIndent}},
		{file: "003-5.reindented.yaml", decodeErr: []string{missingVersion, missingKind}},
		{file: "003-5.completed.yaml", kinds: []string{"ClusterResourcePlacement"}, check: func(t *testing.T, docs []Document) {
			ps := docs[0].Object.(*ClusterResourcePlacement).Status.PlacementStatuses
			if len(ps) != 1 || len(ps[0].FailedPlacements) != 1 {
				t.Fatalf("placementStatuses = %+v", ps)
			}
			fp := ps[0].FailedPlacements[0]
			want := ResourceIdentifier{Kind: "ResourceQuota", Name: "mem-cpu-demo", Namespace: "app", Version: "v1",
				Envelope: &EnvelopeIdentifier{Name: "envelop-configmap", Namespace: "test-ns", Type: ConfigMapEnvelopeType}}
			if fp.Kind != want.Kind || fp.Name != want.Name || *fp.Envelope != *want.Envelope || fp.Condition.Type != "Applied" {
				t.Errorf("failedPlacements[0] = %+v", fp)
			}
		}},
		{file: "004-1.yaml", decodeErr: []string{"holds no YAML document", lostBreaks}},
		{file: "004-1.reindented.yaml", kinds: []string{"Deployment"}},
		{file: "004-2.yaml", decodeErr: []string{"holds no YAML document", lostBreaks}},
		{file: "004-2.reindented.yaml", kinds: []string{"Service"}},
		{file: "004-3.yaml", decodeErr: []string{"holds no YAML document", lostBreaks}},
		{file: "004-3.reindented.yaml", kinds: []string{"PropagationPolicy"}, check: func(t *testing.T, docs []Document) {
			pp := docs[0].Object.(*PropagationPolicy)
			if pp.Spec.SchedulingMode != SchedulingModeDuplicate || len(pp.Spec.Placements) != 1 ||
				pp.Spec.Placements[0].Cluster != "kubeadmiral-member-1" || *pp.Spec.Placements[0].Preferences.Weight != 1 ||
				!pp.Spec.ReschedulePolicy.Trigger.PolicyContentChanged {
				t.Errorf("spec = %+v", pp.Spec)
			}
		}},
		{file: "004-4.yaml", decodeErr: []string{"mapping values are not allowed", lostBreaks}},
		{file: "004-4.reindented.yaml", kinds: []string{"Deployment"}},
		{file: "004-5.yaml", decodeErr: []string{"mapping values are not allowed", lostBreaks}},
		{file: "004-5.reindented.yaml", kinds: []string{"Service"}},
		{file: "004-6.yaml", decodeErr: []string{"holds no YAML document", lostBreaks}},
		{file: "004-6.reindented.yaml", kinds: []string{"Deployment", "Service"}, check: func(t *testing.T, docs []Document) {
			for _, d := range docs {
				u := d.Object.(*unstructured.Unstructured)
				if u.GetAnnotations()[ConflictResolutionAnnotation] != ConflictResolutionAdopt || u.GetLabels()[PropagationPolicyNameLabel] != "nginx-pp" {
					t.Errorf("%s lacks the adoption annotation or policy label: %v %v", u.GetKind(), u.GetAnnotations(), u.GetLabels())
				}
			}
			if docs[1].Index != 1 || docs[1].Line != 73 {
				t.Errorf("second document: index %d line %d, want 1 and 73", docs[1].Index, docs[1].Line)
			}
		}},
		{file: "004-7.yaml", decodeErr: []string{"mapping values are not allowed", lostBreaks}},
		{file: "004-7.reindented.yaml", kinds: []string{"FederatedObject", "FederatedObject"}, check: func(t *testing.T, docs []Document) {
			if docs[0].Item != 0 || docs[1].Item != 1 || docs[1].Index != 0 {
				t.Errorf("List items: %+v %+v", docs[0], docs[1])
			}
		}},
	}

	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "seeds", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			docs, err := DecodeAll(strings.NewReader(string(data)))
			if tt.kinds == nil {
				if err == nil {
					t.Fatalf("decoded %d documents, want an error", len(docs))
				}
				var de *DocumentError
				if !errors.As(err, &de) {
					t.Errorf("error %v is not a *DocumentError", err)
				}
				for _, want := range tt.decodeErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error\n%v\ndoes not mention %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			var kinds []string
			for _, d := range docs {
				kinds = append(kinds, d.Object.GetObjectKind().GroupVersionKind().Kind)
			}
			if !slices.Equal(kinds, tt.kinds) {
				t.Fatalf("kinds = %v, want %v", kinds, tt.kinds)
			}
			var invalid []string
			for _, d := range docs {
				Default(d.Object)
				invalid = append(invalid, Validate(d.Object).Fields()...)
			}
			if !slices.Equal(invalid, tt.invalid) {
				t.Errorf("validation:\n got %q\nwant %q", invalid, tt.invalid)
			}
			if tt.check != nil {
				tt.check(t, docs)
			}
		})
	}

	files, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.yaml"))
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no expectation in TestSeedBlocks", f)
		}
	}
}

// The seed's JSON samples of placementStatuses entries match the status types
// field for field (their lastTransitionTime is the seed's "..." placeholder).
func TestSeedStatusSamples(t *testing.T) {
	for _, file := range []string{"000-3.json", "000-4.json"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "seeds", file))
			if err != nil {
				t.Fatal(err)
			}
			data = []byte(strings.ReplaceAll(string(data), `"lastTransitionTime": "..."`, `"lastTransitionTime": "2024-01-01T00:00:00Z"`))
			var st ResourcePlacementStatus
			if errs := strictUnmarshal(data, &st); len(errs) > 0 {
				t.Fatal(errs)
			}
			fp := st.FailedPlacements[0]
			if st.ClusterName != "member-2" || fp.Kind != "Namespace" || fp.Condition.Type != string(PerClusterAppliedConditionType) {
				t.Errorf("status = %+v", st)
			}
			var want string
			switch fp.Condition.Reason {
			case ManifestNotTakenOverReason:
				want = ManifestApplyFailedMessage(NotTakenOverError)
			case ManifestFailedToTakeOverReason:
				want = ManifestApplyFailedMessage(FailedToTakeOverError)
			}
			if fp.Condition.Message != want {
				t.Errorf("message = %q, want %q", fp.Condition.Message, want)
			}
		})
	}
}

func wantWarning(t *testing.T, d Document, prefix string) {
	t.Helper()
	for _, w := range d.Warnings {
		if strings.HasPrefix(w, prefix) {
			return
		}
	}
	t.Errorf("warnings %q lack %q", d.Warnings, prefix)
}
