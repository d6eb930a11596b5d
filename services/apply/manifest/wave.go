package manifest

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Waves of dependency order. Objects of one wave are applied concurrently; a
// wave starts when the waves it depends on (Prerequisites) have finished.
// Deletion runs the waves one by one in reverse.
const (
	// WaveFoundation: namespaces and CRDs, which other objects live in or are.
	WaveFoundation = iota
	// WaveConfig: policy, identity and configuration objects that workloads
	// refer to.
	WaveConfig
	// WaveBinding: role bindings and claims that refer to the above.
	WaveBinding
	// WaveService: services. Nothing depends on a Service existing first,
	// and creating them is serialised by the member's IP allocator, so they
	// are applied beside configuration and workloads.
	WaveService
	// WaveWorkload: controllers and pods.
	WaveWorkload
	// WaveOther: custom resources and kinds not listed; their CRDs are in
	// the foundation wave.
	WaveOther
	// WaveAdmission: webhooks and API services last, so that a webhook whose
	// backend is in the same placement does not block the placement's own
	// objects.
	WaveAdmission

	// NumWaves is the number of waves.
	NumWaves
)

var waves = map[schema.GroupKind]int{
	{Group: "", Kind: "Namespace"}:                                                    WaveFoundation,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 WaveFoundation,
	{Group: "", Kind: "ResourceQuota"}:                                                WaveConfig,
	{Group: "", Kind: "LimitRange"}:                                                   WaveConfig,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               WaveConfig,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   WaveConfig,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      WaveConfig,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                WaveConfig,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      WaveConfig,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                               WaveConfig,
	{Group: "", Kind: "ServiceAccount"}:                                               WaveConfig,
	{Group: "", Kind: "Secret"}:                                                       WaveConfig,
	{Group: "", Kind: "ConfigMap"}:                                                    WaveConfig,
	{Group: "", Kind: "PersistentVolume"}:                                             WaveConfig,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         WaveConfig,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                                WaveConfig,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  WaveBinding,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                         WaveBinding,
	{Group: "", Kind: "PersistentVolumeClaim"}:                                        WaveBinding,
	{Group: "", Kind: "Service"}:                                                      WaveService,
	{Group: "apps", Kind: "Deployment"}:                                               WaveWorkload,
	{Group: "apps", Kind: "StatefulSet"}:                                              WaveWorkload,
	{Group: "apps", Kind: "DaemonSet"}:                                                WaveWorkload,
	{Group: "apps", Kind: "ReplicaSet"}:                                               WaveWorkload,
	{Group: "", Kind: "ReplicationController"}:                                        WaveWorkload,
	{Group: "", Kind: "Pod"}:                                                          WaveWorkload,
	{Group: "batch", Kind: "Job"}:                                                     WaveWorkload,
	{Group: "batch", Kind: "CronJob"}:                                                 WaveWorkload,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                           WaveWorkload,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                    WaveWorkload,
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                     WaveWorkload,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          WaveAdmission,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   WaveAdmission,
}

// prerequisites lists the waves each wave waits for.
var prerequisites = [NumWaves][]int{
	WaveFoundation: nil,
	WaveConfig:     {WaveFoundation},
	WaveBinding:    {WaveFoundation, WaveConfig},
	WaveService:    {WaveFoundation},
	WaveWorkload:   {WaveFoundation, WaveConfig, WaveBinding},
	WaveOther:      {WaveFoundation, WaveConfig, WaveBinding, WaveService, WaveWorkload},
	WaveAdmission:  {WaveFoundation, WaveConfig, WaveBinding, WaveService, WaveWorkload, WaveOther},
}

// Prerequisites returns the waves that must be applied before wave starts.
func Prerequisites(wave int) []int {
	return prerequisites[wave]
}

// WaveOf returns the wave of a kind.
func WaveOf(gk schema.GroupKind) int {
	if w, ok := waves[gk]; ok {
		return w
	}
	return WaveOther
}

// ByWave groups objects by wave, in wave order; objects keep their relative
// order within a wave. Empty waves are left out.
func ByWave[T any](objs []T, wave func(T) int) [][]T {
	sorted := slices.Clone(objs)
	slices.SortStableFunc(sorted, func(a, b T) int { return cmp.Compare(wave(a), wave(b)) })
	var out [][]T
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && wave(sorted[j]) == wave(sorted[i]) {
			j++
		}
		out = append(out, sorted[i:j])
		i = j
	}
	return out
}
