package change

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterScoped are the built-in cluster-scoped kinds, and Fleet's and
// KubeAdmiral's own. fleetctl has no API discovery, so this list decides
// which objects without a namespace get the default one.
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Kind: "ComponentStatus"}:  true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "placement.kubernetes-fleet.io", Kind: "ClusterResourceEnvelope"}:         true,
	{Group: "placement.kubernetes-fleet.io", Kind: "ClusterResourcePlacement"}:        true,
	{Group: "cluster.kubernetes-fleet.io", Kind: "MemberCluster"}:                     true,
	{Group: "core.kubeadmiral.io", Kind: "ClusterPropagationPolicy"}:                  true,
}

// ClusterScoped reports whether objects of gk have no namespace: a kind in
// the list above, or any kind named Cluster... (ClusterIssuer,
// ClusterSecretStore, ...), the convention of cluster-scoped custom
// resources. Other kinds are taken as namespaced.
func ClusterScoped(gk schema.GroupKind) bool {
	return clusterScoped[gk] || strings.HasPrefix(gk.Kind, "Cluster")
}
