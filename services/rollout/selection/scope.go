package selection

// Scope says whether objects of a kind live in a namespace.
type Scope int

const (
	ClusterScoped Scope = iota
	Namespaced
)

type groupKind struct{ group, kind string }

// knownScopes holds the scope of the built-in kinds and Flotilla's own, so a
// selector for a namespaced kind is reported even before the hub holds any
// object of it. Other kinds' scope is learned from the hub objects.
var knownScopes = map[groupKind]Scope{
	{"", "Namespace"}:        ClusterScoped,
	{"", "Node"}:             ClusterScoped,
	{"", "PersistentVolume"}: ClusterScoped,
	{"rbac.authorization.k8s.io", "ClusterRole"}:                       ClusterScoped,
	{"rbac.authorization.k8s.io", "ClusterRoleBinding"}:                ClusterScoped,
	{"apiextensions.k8s.io", "CustomResourceDefinition"}:               ClusterScoped,
	{"storage.k8s.io", "StorageClass"}:                                 ClusterScoped,
	{"storage.k8s.io", "CSIDriver"}:                                    ClusterScoped,
	{"scheduling.k8s.io", "PriorityClass"}:                             ClusterScoped,
	{"networking.k8s.io", "IngressClass"}:                              ClusterScoped,
	{"node.k8s.io", "RuntimeClass"}:                                    ClusterScoped,
	{"admissionregistration.k8s.io", "MutatingWebhookConfiguration"}:   ClusterScoped,
	{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration"}: ClusterScoped,
	{"apiregistration.k8s.io", "APIService"}:                           ClusterScoped,
	{"placement.kubernetes-fleet.io", "ClusterResourceEnvelope"}:       ClusterScoped,

	{"", "ConfigMap"}:                                     Namespaced,
	{"", "Secret"}:                                        Namespaced,
	{"", "Service"}:                                       Namespaced,
	{"", "ServiceAccount"}:                                Namespaced,
	{"", "Pod"}:                                           Namespaced,
	{"", "PersistentVolumeClaim"}:                         Namespaced,
	{"", "Endpoints"}:                                     Namespaced,
	{"", "LimitRange"}:                                    Namespaced,
	{"", "ResourceQuota"}:                                 Namespaced,
	{"", "ReplicationController"}:                         Namespaced,
	{"", "Event"}:                                         Namespaced,
	{"apps", "Deployment"}:                                Namespaced,
	{"apps", "StatefulSet"}:                               Namespaced,
	{"apps", "DaemonSet"}:                                 Namespaced,
	{"apps", "ReplicaSet"}:                                Namespaced,
	{"batch", "Job"}:                                      Namespaced,
	{"batch", "CronJob"}:                                  Namespaced,
	{"networking.k8s.io", "Ingress"}:                      Namespaced,
	{"networking.k8s.io", "NetworkPolicy"}:                Namespaced,
	{"rbac.authorization.k8s.io", "Role"}:                 Namespaced,
	{"rbac.authorization.k8s.io", "RoleBinding"}:          Namespaced,
	{"policy", "PodDisruptionBudget"}:                     Namespaced,
	{"autoscaling", "HorizontalPodAutoscaler"}:            Namespaced,
	{"discovery.k8s.io", "EndpointSlice"}:                 Namespaced,
	{"coordination.k8s.io", "Lease"}:                      Namespaced,
	{"placement.kubernetes-fleet.io", "ResourceEnvelope"}: Namespaced,
	{"core.kubeadmiral.io", "PropagationPolicy"}:          Namespaced,
	{"core.kubeadmiral.io", "ClusterPropagationPolicy"}:   ClusterScoped,
}

// KnownScope returns the scope of a well-known kind; known is false for
// other kinds.
func KnownScope(group, kind string) (scope Scope, known bool) {
	scope, known = knownScopes[groupKind{group, kind}]
	return scope, known
}
