// Package availability decides whether an applied member object is available,
// per kind, as the Fleet contract says: workloads by their status, services by
// their addresses, CRDs by their conditions, configuration at once, and
// anything else is not trackable and counts as available a set period after
// it was applied.
package availability

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Status values of a condition.
const (
	True    = "True"
	False   = "False"
	Unknown = "Unknown"
)

// Result is the availability of one object: Status True, False or Unknown,
// with a per-manifest reason of the contract (Available,
// ManifestNotAvailableYet, NotTrackable) and a sentence.
type Result struct {
	Status  string
	Reason  string
	Message string
	// RecheckAt, for a not-trackable object not yet counted as available,
	// is when it will be.
	RecheckAt time.Time
}

// Tracking says how Of judges objects it cannot track.
type Tracking struct {
	// AppliedAt is when the object's configuration last changed by Flotilla.
	AppliedAt time.Time
	// UnavailablePeriod is how long after AppliedAt a not-trackable object
	// counts as available.
	UnavailablePeriod time.Duration
	// Now is the current time.
	Now time.Time
}

// immediate are kinds available as soon as they exist.
var immediate = map[[2]string]bool{
	{"", "Namespace"}: true, {"", "ConfigMap"}: true, {"", "Secret"}: true, {"", "ServiceAccount"}: true,
	{"", "LimitRange"}: true, {"", "ResourceQuota"}: true,
	{"rbac.authorization.k8s.io", "Role"}: true, {"rbac.authorization.k8s.io", "ClusterRole"}: true,
	{"rbac.authorization.k8s.io", "RoleBinding"}: true, {"rbac.authorization.k8s.io", "ClusterRoleBinding"}: true,
	{"networking.k8s.io", "NetworkPolicy"}: true, {"networking.k8s.io", "IngressClass"}: true,
	{"scheduling.k8s.io", "PriorityClass"}: true, {"storage.k8s.io", "StorageClass"}: true,
}

// Of returns the availability of obj, the object as read from the member.
func Of(obj *unstructured.Unstructured, t Tracking) Result {
	gvk := obj.GroupVersionKind()
	key := [2]string{gvk.Group, gvk.Kind}
	switch {
	case immediate[key]:
		return available(gvk.Kind + " is available as soon as it exists")
	case key == [2]string{"apps", "Deployment"}:
		return deployment(obj)
	case key == [2]string{"apps", "StatefulSet"}:
		return statefulSet(obj)
	case key == [2]string{"apps", "DaemonSet"}:
		return daemonSet(obj)
	case key == [2]string{"", "Service"}:
		return service(obj, t)
	case key == [2]string{"apiextensions.k8s.io", "CustomResourceDefinition"}:
		return crd(obj)
	}
	return notTrackable(gvk.Kind, t)
}

func available(msg string) Result {
	return Result{Status: True, Reason: api.ManifestAvailableReason, Message: msg}
}

func notYet(format string, args ...any) Result {
	return Result{Status: False, Reason: api.ManifestNotAvailableYetReason, Message: fmt.Sprintf(format, args...)}
}

func notTrackable(kind string, t Tracking) Result {
	ready := t.AppliedAt.Add(t.UnavailablePeriod)
	if t.AppliedAt.IsZero() || !t.Now.Before(ready) {
		return Result{Status: True, Reason: api.ManifestNotTrackableReason,
			Message: fmt.Sprintf("The availability of a %s cannot be tracked; it counts as available %s after it was applied", kind, t.UnavailablePeriod)}
	}
	return Result{Status: Unknown, Reason: api.ManifestNotTrackableReason, RecheckAt: ready,
		Message: fmt.Sprintf("The availability of a %s cannot be tracked; it counts as available at %s, %s after it was applied",
			kind, ready.UTC().Format(time.RFC3339), t.UnavailablePeriod)}
}

func num(obj *unstructured.Unstructured, fields ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, fields...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

func str(obj *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, fields...)
	return s
}

// replicas is spec.replicas with its default of 1.
func replicas(obj *unstructured.Unstructured) int64 {
	if _, set, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas"); !set {
		return 1
	}
	return num(obj, "spec", "replicas")
}

func observed(obj *unstructured.Unstructured) bool {
	return num(obj, "status", "observedGeneration") >= obj.GetGeneration()
}

func deployment(obj *unstructured.Unstructured) Result {
	want := replicas(obj)
	updated, avail := num(obj, "status", "updatedReplicas"), num(obj, "status", "availableReplicas")
	unavailable := num(obj, "status", "unavailableReplicas")
	switch {
	case !observed(obj):
		return notYet("Deployment generation %d has not been observed by its controller yet", obj.GetGeneration())
	case updated != want || avail != want || unavailable != 0:
		return notYet("Deployment has %d/%d updated and %d/%d available replicas", updated, want, avail, want)
	}
	return available(fmt.Sprintf("Deployment has all %d replicas updated and available", want))
}

func statefulSet(obj *unstructured.Unstructured) Result {
	want := replicas(obj)
	avail := num(obj, "status", "availableReplicas")
	current, updated := num(obj, "status", "currentReplicas"), num(obj, "status", "updatedReplicas")
	switch {
	case !observed(obj):
		return notYet("StatefulSet generation %d has not been observed by its controller yet", obj.GetGeneration())
	case avail != want:
		return notYet("StatefulSet has %d/%d available replicas", avail, want)
	case current != updated || str(obj, "status", "currentRevision") != str(obj, "status", "updateRevision"):
		return notYet("StatefulSet is rolling out revision %s", str(obj, "status", "updateRevision"))
	}
	return available(fmt.Sprintf("StatefulSet has all %d replicas available at revision %s", want, str(obj, "status", "updateRevision")))
}

func daemonSet(obj *unstructured.Unstructured) Result {
	desired := num(obj, "status", "desiredNumberScheduled")
	avail := num(obj, "status", "numberAvailable")
	current, updated := num(obj, "status", "currentNumberScheduled"), num(obj, "status", "updatedNumberScheduled")
	switch {
	case !observed(obj):
		return notYet("DaemonSet generation %d has not been observed by its controller yet", obj.GetGeneration())
	case avail != desired:
		return notYet("DaemonSet has %d/%d available pods", avail, desired)
	case current != updated:
		return notYet("DaemonSet has %d/%d updated pods", updated, current)
	}
	return available(fmt.Sprintf("DaemonSet has all %d pods available", desired))
}

func service(obj *unstructured.Unstructured, t Tracking) Result {
	switch typ := str(obj, "spec", "type"); typ {
	case "", "ClusterIP", "NodePort":
		ips, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "clusterIPs")
		if len(ips) > 0 && ips[0] != "" {
			return available("Service has cluster IP " + ips[0])
		}
		if ip := str(obj, "spec", "clusterIP"); ip != "" {
			return available("Service has cluster IP " + ip)
		}
		return notYet("Service has no cluster IP yet")
	case "LoadBalancer":
		ingress, _, _ := unstructured.NestedSlice(obj.Object, "status", "loadBalancer", "ingress")
		for _, in := range ingress {
			if m, ok := in.(map[string]any); ok && (m["ip"] != nil || m["hostname"] != nil) {
				return available("Service load balancer has an ingress address")
			}
		}
		return notYet("Service load balancer has no ingress address yet")
	default:
		return notTrackable("Service of type "+typ, t)
	}
}

func crd(obj *unstructured.Unstructured) Result {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	status := map[string]string{}
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			t, _ := m["type"].(string)
			s, _ := m["status"].(string)
			status[t] = s
		}
	}
	if status["Established"] == True && status["NamesAccepted"] == True {
		return available("CustomResourceDefinition is established and its names are accepted")
	}
	return notYet("CustomResourceDefinition is not established yet (Established=%q, NamesAccepted=%q)",
		status["Established"], status["NamesAccepted"])
}
