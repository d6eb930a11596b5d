package api

// ValidateSpecUpdate is ValidatePlacementUpdate for the specs services keep: the rules
// that relate a placement's new spec to the one in force (placementType immutable,
// tolerations only added). The scheduler, the rollout, the status service and fleetctl
// all judge an update of a live placement with it, so they accept and refuse the same
// updates and never disagree on which spec is current.
func ValidateSpecUpdate(old, new *PlacementSpec) ErrorList {
	return ValidatePlacementUpdate(&ClusterResourcePlacement{Spec: *old}, &ClusterResourcePlacement{Spec: *new})
}
