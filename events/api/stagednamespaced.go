package api

import (
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The namespaced twins of the staged update kinds, for ResourcePlacements:
// upstream's StagedUpdateStrategy (sus), StagedUpdateRun (sur) and
// ApprovalRequest (areq), the same fields as the cluster-scoped kinds. As a
// ResourcePlacement, Flotilla reads one into the cluster-scoped kind's Go value
// with its own kind and a namespace, and the services carry it under a key
// namespace..name (see PlacementKey): the run's placementName and
// stagedRolloutStrategyName and an approval request's parentStageRollout name
// objects of the same namespace, and become keys too. Everything the rollout
// derives from a run's key (its approval requests) is then a key of the
// namespace as well.
const (
	StagedUpdateStrategyKind = "StagedUpdateStrategy"
	StagedUpdateRunKind      = "StagedUpdateRun"
	ApprovalRequestKind      = "ApprovalRequest"
)

// NamespacedStagedKind is the namespaced twin of a cluster-scoped staged update
// kind, "" for another kind.
func NamespacedStagedKind(clusterKind string) string {
	switch clusterKind {
	case ClusterStagedUpdateStrategyKind:
		return StagedUpdateStrategyKind
	case ClusterStagedUpdateRunKind:
		return StagedUpdateRunKind
	case ClusterApprovalRequestKind:
		return ApprovalRequestKind
	}
	return ""
}

// ClusterStagedKind is the cluster-scoped kind a namespaced staged update kind
// is carried as, "" for another kind.
func ClusterStagedKind(namespacedKind string) string {
	switch namespacedKind {
	case StagedUpdateStrategyKind:
		return ClusterStagedUpdateStrategyKind
	case StagedUpdateRunKind:
		return ClusterStagedUpdateRunKind
	case ApprovalRequestKind:
		return ClusterApprovalRequestKind
	}
	return ""
}

// InternalStaged is a staged update object as the services carry it: a
// namespaced one named by its key, with the names it refers to as keys. A
// cluster-scoped one, or one already internal, is returned as it is.
func InternalStaged(obj Object) Object {
	ns := obj.GetNamespace()
	if ns == "" || ClusterStagedKind(obj.GetObjectKind().GroupVersionKind().Kind) == "" {
		return obj
	}
	if keyNS, _ := SplitPlacementKey(obj.GetName()); keyNS != "" {
		return obj
	}
	key := func(name string) string {
		if name == "" {
			return ""
		}
		return PlacementKey(ns, name)
	}
	switch o := obj.(type) {
	case *ClusterStagedUpdateStrategy:
		c := *o
		c.Name = key(o.Name)
		return &c
	case *ClusterStagedUpdateRun:
		c := *o
		c.Name = key(o.Name)
		c.Spec.PlacementName = key(o.Spec.PlacementName)
		c.Spec.StagedUpdateStrategyName = key(o.Spec.StagedUpdateStrategyName)
		return &c
	case *ClusterApprovalRequest:
		c := *o
		c.Name = key(o.Name)
		c.Spec.TargetUpdateRun = key(o.Spec.TargetUpdateRun)
		return &c
	}
	return obj
}

// ExternalStaged is a staged update object as the user sees it: one whose name
// is a key gets back its namespaced kind, its namespace and its own name, and
// the names it refers to lose their namespace. Others are returned as they are.
// obj is not changed.
func ExternalStaged(obj Object) Object {
	ns, name := SplitPlacementKey(obj.GetName())
	if ns == "" {
		return obj
	}
	own := func(key string) string {
		if keyNS, n := SplitPlacementKey(key); keyNS == ns {
			return n
		}
		return key
	}
	meta := func(kind string, t *metav1.TypeMeta) {
		t.Kind = kind
		if t.APIVersion == "" {
			t.APIVersion = PlacementGroupVersion.String()
		}
	}
	switch o := obj.(type) {
	case *ClusterStagedUpdateStrategy:
		c := *o
		meta(StagedUpdateStrategyKind, &c.TypeMeta)
		c.Namespace, c.Name = ns, name
		return &c
	case *ClusterStagedUpdateRun:
		c := *o
		meta(StagedUpdateRunKind, &c.TypeMeta)
		c.Namespace, c.Name = ns, name
		c.Spec.PlacementName = own(o.Spec.PlacementName)
		c.Spec.StagedUpdateStrategyName = own(o.Spec.StagedUpdateStrategyName)
		c.Status.StagesStatus = externalStages(o.Status.StagesStatus, own)
		if o.Status.DeletionStageStatus != nil {
			d := externalStages([]StageUpdatingStatus{*o.Status.DeletionStageStatus}, own)[0]
			c.Status.DeletionStageStatus = &d
		}
		return &c
	case *ClusterApprovalRequest:
		c := *o
		meta(ApprovalRequestKind, &c.TypeMeta)
		c.Namespace, c.Name = ns, name
		c.Spec.TargetUpdateRun = own(o.Spec.TargetUpdateRun)
		if run, ok := o.Labels[TargetUpdateRunLabel]; ok {
			c.Labels = cloneMap(o.Labels)
			c.Labels[TargetUpdateRunLabel] = own(run)
		}
		return &c
	}
	return obj
}

// externalStages copies stages with their approval request names made own.
func externalStages(stages []StageUpdatingStatus, own func(string) string) []StageUpdatingStatus {
	if stages == nil {
		return nil
	}
	out := make([]StageUpdatingStatus, len(stages))
	for i, s := range stages {
		s.AfterStageTaskStatus = externalTasks(s.AfterStageTaskStatus, own)
		s.BeforeStageTaskStatus = externalTasks(s.BeforeStageTaskStatus, own)
		out[i] = s
	}
	return out
}

func externalTasks(tasks []StageTaskStatus, own func(string) string) []StageTaskStatus {
	if tasks == nil {
		return nil
	}
	out := make([]StageTaskStatus, len(tasks))
	for i, t := range tasks {
		t.ApprovalRequestName = own(t.ApprovalRequestName)
		out[i] = t
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// validateStagedScope checks the name and scope of a staged update object: a
// cluster-scoped one has no namespace; a namespaced one (its namespaced kind,
// or a key for a name) has one, and its name is checked without it. It
// returns whether the object is namespaced.
func validateStagedScope(p *problems, clusterKind, kind string, m *metav1.ObjectMeta) bool {
	name := m.Name
	keyNS, own := SplitPlacementKey(name)
	namespaced := kind == NamespacedStagedKind(clusterKind) || keyNS != ""
	if !namespaced {
		validateName(p, name, field.NewPath("metadata", "name"))
		validateClusterScoped(p, clusterKind, m.Namespace)
		return false
	}
	nsPath := field.NewPath("metadata", "namespace")
	switch {
	case m.Namespace == "":
		p.add(ErrorTypeRequired, nsPath, "is required: a %s is namespaced", NamespacedStagedKind(clusterKind))
	case keyNS != "" && keyNS != m.Namespace:
		p.add(ErrorTypeInvalid, field.NewPath("metadata", "name"), "%q is not a name in namespace %q", name, m.Namespace)
	default:
		if msgs := content.IsDNS1123Label(m.Namespace); len(msgs) > 0 {
			p.add(ErrorTypeInvalid, nsPath, "%q is not a valid namespace", m.Namespace)
		}
	}
	if keyNS != "" {
		name = own
	}
	validateName(p, name, field.NewPath("metadata", "name"))
	return true
}

// isKey reports whether name is a namespaced key (namespace..name).
func isKey(name string) bool {
	ns, _ := SplitPlacementKey(name)
	return ns != ""
}
