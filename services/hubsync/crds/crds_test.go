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
	envelope := crds[2].Spec.Versions[0].Schema.OpenAPIV3Schema
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
