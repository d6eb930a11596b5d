package crds

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestPlacementSchema checks the fields a user writes and kubectl reads are in the schema with
// the types their JSON has.
func TestPlacementSchema(t *testing.T) {
	crd, err := Placement.CRD()
	if err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for path, want := range map[string]string{
		"spec.resourceSelectors":                               "array",
		"spec.policy.placementType":                            "string",
		"spec.policy.numberOfClusters":                         "integer",
		"spec.strategy.rollingUpdate.maxUnavailable":           "",
		"spec.strategy.applyStrategy.whenToTakeOver":           "string",
		"status.placementStatuses":                             "array",
		"status.conditions":                                    "array",
		"metadata":                                             "object",
		"apiVersion":                                           "string",
		"spec.strategy.rollingUpdate.unavailablePeriodSeconds": "integer",
	} {
		s := lookup(t, root, path)
		if s.Type != want {
			t.Errorf("%s has type %q, want %q", path, s.Type, want)
		}
	}
	if s := lookup(t, root, "spec.strategy.rollingUpdate.maxUnavailable"); !s.XIntOrString {
		t.Errorf("maxUnavailable takes 100%% or 1: want x-kubernetes-int-or-string")
	}
	if crd.Spec.Names.ShortNames[0] != "crp" || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Errorf("names %+v, subresources %+v", crd.Spec.Names, crd.Spec.Versions[0].Subresources)
	}
}

func TestEveryKindHasASchema(t *testing.T) {
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != len(Kinds) {
		t.Fatalf("%d CRDs for %d kinds", len(crds), len(Kinds))
	}
	envelopeCRD, err := ClusterEnvelope.CRD()
	if err != nil {
		t.Fatal(err)
	}
	envelope := envelopeCRD.Spec.Versions[0].Schema.OpenAPIV3Schema
	data := lookup(t, envelope, "data")
	if data.AdditionalProperties == nil || data.AdditionalProperties.Schema.XPreserveUnknownFields == nil {
		t.Errorf("an envelope's data entries are manifests kept as they are: %+v", data)
	}
}

func lookup(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	cur := *s
	for _, part := range splitPath(path) {
		if cur.Type == "array" {
			cur = *cur.Items.Schema
		}
		next, ok := cur.Properties[part]
		if !ok {
			t.Fatalf("%s: no property %q", path, part)
		}
		cur = next
	}
	return cur
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return out
}

// TestOverrideEvictionAndBudgetSchemas checks the fields of the kinds added for overrides and
// evictions: a JSON patch's value takes any JSON (kubectl writes value: blue), an eviction has
// a status subresource hubsync writes, and the short names are upstream's.
func TestOverrideEvictionAndBudgetSchemas(t *testing.T) {
	for _, k := range []Kind{ClusterOverride, Override} {
		crd, err := k.CRD()
		if err != nil {
			t.Fatal(err)
		}
		value := lookup(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "spec.policy.overrideRules.jsonPatchOverrides.value")
		if value.Type != "" || value.XPreserveUnknownFields == nil || !*value.XPreserveUnknownFields {
			t.Errorf("%s: a patch's value has type %q, preserve %v; want any JSON", k.GVK.Kind, value.Type, value.XPreserveUnknownFields)
		}
	}
	for k, want := range map[*Kind]string{&Eviction: "crpe", &DisruptionBudget: "crpdb", &StagedUpdateStrategy: "csus", &StagedUpdateRun: "csur"} {
		crd, err := k.CRD()
		if err != nil {
			t.Fatal(err)
		}
		if crd.Spec.Names.ShortNames[0] != want || crd.Spec.Scope != apiextensionsv1.ClusterScoped {
			t.Errorf("%s: names %+v, scope %s", k.GVK.Kind, crd.Spec.Names, crd.Spec.Scope)
		}
	}
	root := mustCRD(t, Eviction).Spec.Versions[0].Schema.OpenAPIV3Schema
	if s := lookup(t, root, "spec.placementName"); s.Type != "string" {
		t.Errorf("spec.placementName has type %q", s.Type)
	}
	if mustCRD(t, Eviction).Spec.Versions[0].Subresources == nil {
		t.Errorf("an eviction has no status subresource")
	}
	if s := lookup(t, mustCRD(t, DisruptionBudget).Spec.Versions[0].Schema.OpenAPIV3Schema, "spec.minAvailable"); !s.XIntOrString {
		t.Errorf("minAvailable takes 1 or 50%%: want x-kubernetes-int-or-string")
	}
}

func mustCRD(t *testing.T, k Kind) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := k.CRD()
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestResourcePlacementCRD: the namespaced placement has upstream's names, a status
// subresource, the placement's schema, and columns that read its ResourcePlacement
// condition names.
func TestResourcePlacementCRD(t *testing.T) {
	crd, err := ResourcePlacement.CRD()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "resourceplacements.placement.kubernetes-fleet.io" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		crd.Spec.Names.Kind != "ResourcePlacement" || crd.Spec.Names.Singular != "resourceplacement" ||
		len(crd.Spec.Names.ShortNames) != 1 || crd.Spec.Names.ShortNames[0] != "rp" ||
		len(crd.Spec.Names.Categories) != 2 || crd.Spec.Names.Categories[1] != "fleet-placement" {
		t.Errorf("names %s %s %+v", crd.Name, crd.Spec.Scope, crd.Spec.Names)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1beta1" || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s, subresources %+v", v.Name, v.Subresources)
	}
	if s := lookup(t, v.Schema.OpenAPIV3Schema, "spec.resourceSelectors"); s.Type != "array" {
		t.Errorf("spec.resourceSelectors has type %q", s.Type)
	}
	paths := map[string]string{}
	for _, c := range v.AdditionalPrinterColumns {
		paths[c.Name] = c.JSONPath
	}
	for name, typ := range map[string]string{"Scheduled": "ResourcePlacementScheduled", "Available": "ResourcePlacementAvailable", "Applied": "ResourcePlacementApplied"} {
		if want := `.status.conditions[?(@.type=="` + typ + `")].status`; paths[name] != want {
			t.Errorf("column %s reads %q, want %q", name, paths[name], want)
		}
	}
	if _, ok := ByGVK(ResourcePlacement.GVK); !ok {
		t.Errorf("ByGVK does not find ResourcePlacement")
	}
}
