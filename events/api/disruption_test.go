package api

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDecodeEvictionAndBudget(t *testing.T) {
	for _, v := range FleetVersions {
		objs, err := DecodeAll(strings.NewReader(`apiVersion: placement.kubernetes-fleet.io/` + v + `
kind: ClusterResourcePlacementEviction
metadata: {name: test-eviction}
spec: {placementName: test-crp, clusterName: kind-cluster-1}
---
apiVersion: placement.kubernetes-fleet.io/` + v + `
kind: ClusterResourcePlacementDisruptionBudget
metadata: {name: test-crp}
spec: {minAvailable: 1}
`))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		e, ok := objs[0].Object.(*ClusterResourcePlacementEviction)
		if !ok || e.Spec.PlacementName != "test-crp" || e.Spec.ClusterName != "kind-cluster-1" {
			t.Fatalf("%s: eviction = %#v", v, objs[0])
		}
		b, ok := objs[1].Object.(*ClusterResourcePlacementDisruptionBudget)
		if !ok || b.Spec.MinAvailable == nil || b.Spec.MinAvailable.IntValue() != 1 || b.Spec.MaxUnavailable != nil {
			t.Fatalf("%s: budget = %#v", v, objs[1])
		}
		if errs := Validate(e); len(errs) > 0 {
			t.Errorf("%s: eviction: %v", v, errs)
		}
		if errs := Validate(b); len(errs) > 0 {
			t.Errorf("%s: budget: %v", v, errs)
		}
	}
}

func TestValidateEviction(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, tc := range []struct {
		name, placement, cluster, want string
	}{
		{"no placement", "", "m1", "spec.placementName: is required"},
		{"no cluster", "crp", "", "spec.clusterName: is required"},
		{"long cluster", "crp", long, "spec.clusterName: must be at most 255 characters, not 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &ClusterResourcePlacementEviction{Spec: PlacementEvictionSpec{PlacementName: tc.placement, ClusterName: tc.cluster}}
			e.Name = "ev"
			if errs := ValidateEviction(e); !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("ValidateEviction = %v, want %q", errs, tc.want)
			}
		})
	}
	old := &ClusterResourcePlacementEviction{Spec: PlacementEvictionSpec{PlacementName: "a", ClusterName: "m1"}}
	old.Name = "ev"
	changed := &ClusterResourcePlacementEviction{Spec: PlacementEvictionSpec{PlacementName: "b", ClusterName: "m2"}}
	changed.Name = "ev"
	errs := ValidateUpdate(old, changed).Error()
	for _, want := range []string{"The PlacementName field is immutable", "The ClusterName field is immutable"} {
		if !strings.Contains(errs, want) {
			t.Errorf("ValidateUpdate = %v, want %q", errs, want)
		}
	}
}

func TestValidateDisruptionBudget(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	const valueMsg = "If supplied value is String should match regex '^(100|[0-9]{1,2})%$' or If supplied value is Integer must be greater than or equal to 0"
	for _, tc := range []struct {
		name     string
		max, min *intstr.IntOrString
		want     string // "" for valid
	}{
		{"minAvailable number", nil, num(1), ""},
		{"maxUnavailable zero", num(0), nil, ""},
		{"percentages", nil, pct("100%"), ""},
		{"neither", nil, nil, ""},
		{"both", num(1), num(1), "spec: Both MaxUnavailable and MinAvailable cannot be specified"},
		{"negative", num(-1), nil, "spec.maxUnavailable: " + valueMsg},
		{"over 100%", nil, pct("101%"), "spec.minAvailable: " + valueMsg},
		{"not a percentage", nil, pct("half"), "spec.minAvailable: " + valueMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &ClusterResourcePlacementDisruptionBudget{Spec: PlacementDisruptionBudgetSpec{MaxUnavailable: tc.max, MinAvailable: tc.min}}
			b.Name = "crp"
			errs := ValidateDisruptionBudget(b)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("ValidateDisruptionBudget = %v, want none", errs)
			case tc.want != "" && !strings.Contains(errs.Error(), tc.want):
				t.Errorf("ValidateDisruptionBudget = %v, want %q", errs, tc.want)
			}
		})
	}
}

func TestValidateDisruptionBudgetForPlacement(t *testing.T) {
	pct := intstr.FromString("50%")
	one := intstr.FromInt32(1)
	pickAll := &ClusterResourcePlacement{}
	pickN := &ClusterResourcePlacement{Spec: PlacementSpec{Policy: &PlacementPolicy{PlacementType: PickNPlacementType}}}
	for _, tc := range []struct {
		name string
		crp  *ClusterResourcePlacement
		spec PlacementDisruptionBudgetSpec
		want string
	}{
		{"PickAll minAvailable number", pickAll, PlacementDisruptionBudgetSpec{MinAvailable: &one}, ""},
		{"PickAll maxUnavailable", pickAll, PlacementDisruptionBudgetSpec{MaxUnavailable: &one},
			"cluster resource placement policy type PickAll is not supported with any specified max unavailable 1"},
		{"PickAll minAvailable percentage", pickAll, PlacementDisruptionBudgetSpec{MinAvailable: &pct},
			"cluster resource placement policy type PickAll is not supported with min available as a percentage 50%"},
		{"PickN percentages", pickN, PlacementDisruptionBudgetSpec{MaxUnavailable: &pct}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateDisruptionBudgetForPlacement(&ClusterResourcePlacementDisruptionBudget{Spec: tc.spec}, tc.crp)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("got %v, want none", errs)
			case tc.want != "" && !strings.Contains(errs.Error(), tc.want):
				t.Errorf("got %v, want %q", errs, tc.want)
			}
		})
	}
}
