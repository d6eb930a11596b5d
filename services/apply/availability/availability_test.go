package availability_test

import (
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/availability"
	"github.com/flotilla-dev/flotilla/services/apply/internal/applytest"
)

func TestOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recent := availability.Tracking{AppliedAt: now.Add(-10 * time.Second), UnavailablePeriod: time.Minute, Now: now}
	old := availability.Tracking{AppliedAt: now.Add(-2 * time.Minute), UnavailablePeriod: time.Minute, Now: now}
	cases := []struct {
		name   string
		obj    string
		t      availability.Tracking
		status string
		reason string
	}{
		{"configmap at once", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}", recent, "True", api.ManifestAvailableReason},
		{"namespace at once", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}", recent, "True", api.ManifestAvailableReason},
		{"deployment unobserved", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 1, replicas: 2, updatedReplicas: 2, availableReplicas: 2}`, recent, "False", api.ManifestNotAvailableYetReason},
		{"deployment rolling", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 3, updatedReplicas: 1, availableReplicas: 2, unavailableReplicas: 1}`, recent, "False", api.ManifestNotAvailableYetReason},
		{"deployment available", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, generation: 2}
spec: {replicas: 2}
status: {observedGeneration: 2, replicas: 2, updatedReplicas: 2, availableReplicas: 2}`, recent, "True", api.ManifestAvailableReason},
		{"deployment of zero", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, generation: 1}
spec: {replicas: 0}
status: {observedGeneration: 1}`, recent, "True", api.ManifestAvailableReason},
		{"statefulset revision pending", `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: a, generation: 1}
spec: {replicas: 1}
status: {observedGeneration: 1, availableReplicas: 1, currentReplicas: 1, updatedReplicas: 1, currentRevision: r1, updateRevision: r2}`, recent, "False", api.ManifestNotAvailableYetReason},
		{"daemonset available", `
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: a, generation: 1}
status: {observedGeneration: 1, desiredNumberScheduled: 3, numberAvailable: 3, currentNumberScheduled: 3, updatedNumberScheduled: 3}`, recent, "True", api.ManifestAvailableReason},
		{"service with ip", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.0.0.1, clusterIPs: [10.0.0.1]}", recent, "True", api.ManifestAvailableReason},
		{"headless service", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {clusterIP: None, clusterIPs: [None]}", recent, "True", api.ManifestAvailableReason},
		{"load balancer pending", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: LoadBalancer, clusterIP: 10.0.0.1}", recent, "False", api.ManifestNotAvailableYetReason},
		{"load balancer ready", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: LoadBalancer}\nstatus: {loadBalancer: {ingress: [{ip: 1.2.3.4}]}}", recent, "True", api.ManifestAvailableReason},
		{"external name", "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {type: ExternalName, externalName: x.example}", recent, "Unknown", api.ManifestNotTrackableReason},
		{"crd established", `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: a}
status: {conditions: [{type: Established, status: "True"}, {type: NamesAccepted, status: "True"}]}`, recent, "True", api.ManifestAvailableReason},
		{"crd pending", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a}", recent, "False", api.ManifestNotAvailableYetReason},
		{"untrackable within its period", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}", recent, "Unknown", api.ManifestNotTrackableReason},
		{"untrackable after its period", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}", old, "True", api.ManifestNotTrackableReason},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := availability.Of(applytest.Object(t, c.obj), c.t)
			if r.Status != c.status || r.Reason != c.reason || r.Message == "" {
				t.Errorf("got %+v, want %s/%s", r, c.status, c.reason)
			}
			if c.status == "Unknown" && r.Reason == api.ManifestNotTrackableReason && !r.RecheckAt.Equal(c.t.AppliedAt.Add(c.t.UnavailablePeriod)) {
				t.Errorf("recheck at %s", r.RecheckAt)
			}
		})
	}
}
