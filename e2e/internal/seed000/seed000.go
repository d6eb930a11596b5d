// Package seed000 holds what seed 000's takeover story applies and expects, word for
// word, for the suites that tell it: on local member processes (e2e/scenarios) and
// through the compose stack (e2e/compose).
package seed000

// Placement is the seed's web-2-crp: PickAll of the namespaces labelled app: web-2, with
// the given lines under spec.strategy.applyStrategy (indented six spaces).
func Placement(applyStrategy string) string {
	return `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web-2-crp
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      version: v1
      labelSelector:
        matchLabels:
          app: web-2
  policy:
    placementType: PickAll
  strategy:
    applyStrategy:
` + applyStrategy + `
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 100%
      unavailablePeriodSeconds: 1
`
}

// The applyStrategy lines of the story's three steps.
const (
	Never           = "      whenToTakeOver: Never"
	IfNoDiffPartial = "      whenToTakeOver: IfNoDiff\n      comparisonOption: partialComparison"
	Always          = "      whenToTakeOver: Always"
)

// The messages seeds 000 and 002 show, word for word: users script against them.
const (
	NotTakenOverMessage     = "Failed to apply the manifest (error: no ownership of the object in the member cluster; takeover is needed)"
	FailedToTakeOverMessage = "Failed to apply the manifest (error: cannot take over object: configuration differences are found between the manifest object and the corresponding object in the member cluster)"
)
