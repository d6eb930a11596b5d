package api_test

import (
	"fmt"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Decode a user's file, fill in the defaults and report every problem with
// its field path.
func ExampleDecodeAll() {
	input := `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web
spec:
  resourceSelectors:
    - {group: "", version: v1, kind: Namespace, name: web}
  policy:
    placementType: pickN
  strategy:
    applyStrategy:
      comparisonOption: partialComparison
`
	docs, err := api.DecodeAll(strings.NewReader(input))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, doc := range docs {
		for _, w := range doc.Warnings {
			fmt.Println("warning:", w)
		}
		api.Default(doc.Object)
		for _, problem := range api.Validate(doc.Object) {
			fmt.Println("invalid:", problem)
		}
	}
	// Output:
	// warning: spec.policy.placementType: read "pickN" as "PickN"
	// warning: spec.strategy.applyStrategy.comparisonOption: read "partialComparison" as "PartialComparison"
	// invalid: spec.policy.numberOfClusters: required when placementType is PickN
}

// An unknown field is reported at its full path, with the line and a suggestion.
func ExampleDecode_unknownField() {
	_, err := api.Decode([]byte(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web
spec:
  policy:
    placementTyp: PickAll
`))
	fmt.Println(err)
	// Output:
	// document 1 (ClusterResourcePlacement web, starting at line 1): spec.policy.placementTyp: unknown field; did you mean "placementType"? (line 7)
}
