// Package api holds the Kubernetes-shaped types Flotilla accepts from users and
// carries in event payloads: Fleet's ClusterResourcePlacement
// (placement.kubernetes-fleet.io v1beta1 and v1), MemberCluster
// (cluster.kubernetes-fleet.io v1beta1 and v1), the envelope kinds, the
// override kinds (ClusterResourceOverride, ResourceOverride: v1alpha1, v1beta1
// and v1), and KubeAdmiral's
// PropagationPolicy (core.kubeadmiral.io/v1alpha1).
//
// Go names and JSON tags mirror upstream so that a user's existing YAML works
// unchanged. On top of the types the package offers what every service needs to
// treat that YAML the same way:
//
//   - Decode and DecodeAll turn YAML or JSON into typed objects (or
//     *unstructured.Unstructured for any other manifest), strictly: an unknown
//     field is an error naming its full path.
//   - SetDefaults fills in the documented defaults.
//   - Validate and ValidateUpdate report every problem at once, each at its
//     field path in a sentence a user understands.
//   - StripServerFields removes what an API server added, so manifests pasted
//     from `kubectl get -o yaml` can be placed.
//
// The condition types, reasons and messages in conditions.go are the contract
// the status service reproduces.
package api
