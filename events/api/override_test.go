package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metaNamed(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

func rawJSON(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

// The example of upstream's documentation, in each version the documentation uses.
const croDoc = `apiVersion: placement.kubernetes-fleet.io/%s
kind: ClusterResourceOverride
metadata:
  name: example-cro
spec:
  placement:
    name: crp-example
  clusterResourceSelectors:
    - group: rbac.authorization.k8s.io
      kind: ClusterRole
      version: v1
      name: secret-reader
  policy:
    overrideRules:
      - clusterSelector:
          clusterSelectorTerms:
            - labelSelector:
                matchLabels:
                  env: prod
        jsonPatchOverrides:
          - op: remove
            path: /rules/0/verbs/2
`

func TestDecodeOverridesInEveryUpstreamVersion(t *testing.T) {
	for _, v := range OverrideVersions {
		t.Run(v, func(t *testing.T) {
			obj, err := Decode([]byte(strings.Replace(croDoc, "%s", v, 1)))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			cro, ok := obj.(*ClusterResourceOverride)
			if !ok {
				t.Fatalf("Decode returned %T, want *ClusterResourceOverride", obj)
			}
			if got := cro.APIVersion; got != "placement.kubernetes-fleet.io/"+v {
				t.Errorf("apiVersion = %q, want the version written", got)
			}
			if errs := Validate(cro); len(errs) > 0 {
				t.Errorf("Validate: %v", errs)
			}
			Default(cro)
			rule := cro.Spec.Policy.OverrideRules[0]
			if rule.OverrideType != JSONPatchOverrideType || cro.Spec.Placement.Scope != ClusterScoped {
				t.Errorf("defaults: overrideType %q, placement scope %q; want JSONPatch and Cluster", rule.OverrideType, cro.Spec.Placement.Scope)
			}
			if p := rule.JSONPatchOverrides[0]; p.Operator != JSONPatchOverrideOpRemove || len(p.Value.Raw) != 0 {
				t.Errorf("patch %+v, want remove without a value", p)
			}
			// A remove has no value, and none is written back.
			out, err := json.Marshal(cro)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), `"value"`) {
				t.Errorf("the override encodes a value for a remove: %s", out)
			}
		})
	}
}

func TestDecodeResourceOverrideWithVariablesAndAnyValue(t *testing.T) {
	obj, err := Decode([]byte(`apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata:
  name: ro-1
  namespace: test-namespace
spec:
  resourceSelectors:
    - group: apps
      kind: Deployment
      version: v1
      name: test-nginx
  policy:
    overrideRules:
      - clusterSelector:
          clusterSelectorTerms: []
        jsonPatchOverrides:
          - op: Add
            path: /metadata/labels/cluster-name
            value: "${MEMBER-CLUSTER-NAME}"
          - op: replace
            path: /spec/template/spec/containers/0/image
            value: "nginx:${MEMBER-CLUSTER-LABEL-KEY-region}"
          - op: replace
            path: /spec/replicas
            value: 3
      - clusterSelector:
          clusterSelectorTerms:
            - labelSelector:
                matchLabels: {env: test}
        overrideType: Delete
`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	ro := obj.(*ResourceOverride)
	if errs := Validate(ro); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	patches := ro.Spec.Policy.OverrideRules[0].JSONPatchOverrides
	if patches[0].Operator != JSONPatchOverrideOpAdd {
		t.Errorf("op Add read as %q, want add", patches[0].Operator)
	}
	if got := string(patches[2].Value.Raw); got != "3" {
		t.Errorf("value 3 read as %s", got)
	}
	o, ok := OverrideOf(ro)
	if !ok {
		t.Fatal("OverrideOf refused a ResourceOverride")
	}
	want := []ResourceIdentifier{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "test-namespace", Name: "test-nginx"}}
	if !reflect.DeepEqual(o.Targets, want) || o.Key != (OverrideKey{Kind: ResourceOverrideKind, Namespace: "test-namespace", Name: "ro-1"}) {
		t.Errorf("OverrideOf = %+v", o)
	}
	if !o.ForPlacement("anything") {
		t.Error("an override without a placement concerns every placement")
	}
}

func TestDecodeOverrideRejectsUnknownFields(t *testing.T) {
	_, err := Decode([]byte(`apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterResourceOverride
metadata: {name: a}
spec:
  clusterResourceSelectors: [{group: "", version: v1, kind: Namespace, name: app}]
  policy:
    overrideRules:
      - jsonPatchOverride: [{op: add, path: /metadata/labels/a, value: b}]
`))
	if err == nil || !strings.Contains(err.Error(), "spec.policy.overrideRules[0].jsonPatchOverride") {
		t.Errorf("Decode error = %v, want the unknown field named by its path", err)
	}
}

func TestValidateOverridesReportsEveryProblemAtItsPath(t *testing.T) {
	tests := []struct {
		name string
		obj  Object
		want []string
	}{{
		name: "cluster resource override",
		obj: &ClusterResourceOverride{
			ObjectMeta: metaNamed("cro", "ns"),
			Spec: ClusterResourceOverrideSpec{
				Placement: &PlacementRef{Name: "crp", Scope: NamespaceScoped},
				ClusterResourceSelectors: []ClusterResourceSelector{
					{Version: "v1", Kind: "Namespace", Name: "app"},
					{Version: "v1", Kind: "Namespace", Name: "app"},
					{Version: "v1", Kind: "Namespace", LabelSelector: &metav1.LabelSelector{}},
				},
				Policy: &OverridePolicy{OverrideRules: []OverrideRule{
					{OverrideType: DeleteOverrideType, JSONPatchOverrides: []JSONPatchOverride{{Operator: "add", Path: "/a", Value: rawJSON(`1`)}}},
					{ClusterSelector: &ClusterSelector{ClusterSelectorTerms: []ClusterSelectorTerm{{PropertySelector: &PropertySelector{}}}},
						JSONPatchOverrides: []JSONPatchOverride{
							{Operator: "move", Path: "/spec/a"},
							{Operator: "remove", Path: "/status/phase", Value: rawJSON(`"x"`)},
							{Operator: "replace", Path: "/metadata/name", Value: rawJSON(`"y"`)},
							{Operator: "add", Path: "spec//x"},
							{Operator: "add", Path: "/kind", Value: rawJSON(`"X"`)},
							{Operator: "add", Path: "/metadata/labels/a", Value: rawJSON(`"${MEMBER-CLUSTER-LABEL-KEY-bad key}"`)},
						}},
					{},
				}},
			},
		},
		want: []string{
			`metadata.namespace: must be empty: ClusterResourceOverride is cluster-scoped`,
			`spec.placement.scope: clusterResourceOverride placement reference cannot be Namespaced scope`,
			`spec.clusterResourceSelectors[1]: selects the same object as clusterResourceSelectors[0]; selectors must be unique`,
			`spec.clusterResourceSelectors[2].labelSelector: is not supported: an override selects objects by name`,
			`spec.clusterResourceSelectors[2].name: is required: an override selects objects by name`,
			`spec.policy.overrideRules[0].jsonPatchOverrides: cannot be set when the override type is Delete`,
			`spec.policy.overrideRules[1].clusterSelector.clusterSelectorTerms[0].propertySelector: is not supported: an override rule selects clusters by labelSelector only`,
			`spec.policy.overrideRules[1].clusterSelector.clusterSelectorTerms[0].labelSelector: is required: an override rule selects clusters by labelSelector`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[0].op: "move" is not supported; use add, remove or replace`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[1].path: "/status/phase" is not valid: cannot override status fields`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[1].value: must be empty: a remove operation has no value`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[2].path: "/metadata/name" is not valid: cannot override metadata fields except annotations and labels`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[3].path: "spec//x" is not valid: path must start with /`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[3].value: is required for the add operation`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[4].path: "/kind" is not valid: cannot override typeMeta fields`,
			`spec.policy.overrideRules[1].jsonPatchOverrides[5].value: the variable ${MEMBER-CLUSTER-LABEL-KEY-bad key} names "bad key", which is not a valid label key: ` +
				`name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`spec.policy.overrideRules[2].jsonPatchOverrides: at least one JSON patch is required when the override type is JSONPatch`,
		},
	}, {
		name: "resource override",
		obj: &ResourceOverride{
			ObjectMeta: metaNamed("ro", ""),
			Spec: ResourceOverrideSpec{
				Placement:         &PlacementRef{Name: "rp", Scope: NamespaceScoped},
				ResourceSelectors: []ResourceSelector{{Group: "apps", Kind: "Deployment"}},
			},
		},
		want: []string{
			`metadata.namespace: is required: a ResourceOverride is namespaced and selects objects of its namespace`,
			`spec.resourceSelectors[0].version: is required`,
			`spec.resourceSelectors[0].name: is required: an override selects objects by name`,
			`spec.policy: is required`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Validate(tt.obj).Fields()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}

func TestOverrideConflictsNameBothOverrides(t *testing.T) {
	secretReader := ClusterResourceSelector{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "secret-reader"}
	cro := func(name string, sel ...ClusterResourceSelector) Override {
		o, _ := OverrideOf(&ClusterResourceOverride{ObjectMeta: metaNamed(name, ""),
			Spec: ClusterResourceOverrideSpec{ClusterResourceSelectors: sel}})
		return o
	}
	ro := func(ns, name string) Override {
		o, _ := OverrideOf(&ResourceOverride{ObjectMeta: metaNamed(name, ns),
			Spec: ResourceOverrideSpec{ResourceSelectors: []ResourceSelector{{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "secret-reader"}}}})
		return o
	}
	other := ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: "app"}
	live := []Override{cro("example-cro", secretReader), cro("new-cro", other), ro("ns", "ro")}

	// The same override again, and one selecting something else, are fine.
	if errs := OverrideConflicts(cro("example-cro", secretReader, other), live[:1]); len(errs) > 0 {
		t.Errorf("an override conflicts with its own former version: %v", errs)
	}
	// An object selected at another version is the same object.
	v2 := secretReader
	v2.Version = "v2"
	got := OverrideConflicts(cro("new-cro", other, v2), live).Fields()
	want := []string{`spec.clusterResourceSelectors[1]: selects ClusterRole secret-reader (rbac.authorization.k8s.io/v2), which ClusterResourceOverride "example-cro" already selects: ` +
		`an object may be selected by one ClusterResourceOverride only (the resource has been selected by both new-cro and example-cro, which is not supported)`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OverrideConflicts:\n got %q\nwant %q", got, want)
	}
	// ResourceOverrides conflict only with ResourceOverrides of the same namespace.
	if errs := OverrideConflicts(ro("other-ns", "ro"), live); len(errs) > 0 {
		t.Errorf("ResourceOverrides of other namespaces conflict: %v", errs)
	}
	if errs := OverrideConflicts(ro("ns", "ro-2"), live); len(errs) != 1 || !strings.Contains(errs[0].Detail, `ResourceOverride "ro"`) {
		t.Errorf("two ResourceOverrides of one object: %v", errs)
	}
}

func TestSortOverridesPutsResourceOverridesLast(t *testing.T) {
	os := []Override{
		{Key: OverrideKey{Kind: ResourceOverrideKind, Namespace: "a", Name: "z"}},
		{Key: OverrideKey{Kind: ClusterResourceOverrideKind, Name: "b"}},
		{Key: OverrideKey{Kind: ClusterResourceOverrideKind, Name: "a"}},
	}
	SortOverrides(os)
	var got []string
	for _, o := range os {
		got = append(got, o.Key.String())
	}
	want := []string{"ClusterResourceOverride a", "ClusterResourceOverride b", "ResourceOverride a/z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}
