package applier_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// The member's Deployment and Service of seed 004, as `kubectl apply` of the
// user's original files left them.
const seedMemberDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: my-nginx
  namespace: %s
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"my-nginx","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"run":"my-nginx"}},"template":{"metadata":{"labels":{"run":"my-nginx"}},"spec":{"containers":[{"image":"nginx","name":"my-nginx","ports":[{"containerPort":80}]}]}}}}
spec:
  replicas: 2
  selector:
    matchLabels:
      run: my-nginx
  template:
    metadata:
      labels:
        run: my-nginx
    spec:
      containers:
      - image: nginx
        name: my-nginx
        ports:
        - containerPort: 80
`

const seedMemberService = `
apiVersion: v1
kind: Service
metadata:
  name: my-nginx
  namespace: %s
  labels:
    run: my-nginx
spec:
  ports:
  - port: 80
    protocol: TCP
  selector:
    run: my-nginx
`

// The hub copies of seed 004's resources.yaml: the member's objects as `kubectl
// get -o yaml` printed them, with KubeAdmiral's adopt annotation and policy
// label, and server fields left in (Flotilla strips them; the user removed
// only resourceVersion and the cluster IPs, as the seed says).
const seedHubDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    kubeadmiral.io/propagation-policy-name: nginx-pp
  annotations:
    kubeadmiral.io/conflict-resolution: adopt
    deployment.kubernetes.io/revision: "1"
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{},"name":"my-nginx","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"run":"my-nginx"}},"template":{"metadata":{"labels":{"run":"my-nginx"}},"spec":{"containers":[{"image":"nginx","name":"my-nginx","ports":[{"containerPort":80}]}]}}}}
  creationTimestamp: "2023-08-30T02:26:57Z"
  generation: 1
  name: my-nginx
  namespace: %s
  uid: 5b64f73b-ce6d-4ada-998e-db6f682155f6
spec:
  progressDeadlineSeconds: 600
  replicas: 2
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      run: my-nginx
  strategy:
    rollingUpdate:
      maxSurge: 25%%
      maxUnavailable: 25%%
    type: RollingUpdate
  template:
    metadata:
      creationTimestamp: null
      labels:
        run: my-nginx
    spec:
      containers:
      - image: nginx
        imagePullPolicy: Always
        name: my-nginx
        ports:
        - containerPort: 80
          protocol: TCP
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  availableReplicas: 2
  observedGeneration: 1
  readyReplicas: 2
  replicas: 2
  updatedReplicas: 2
`

const seedHubService = `
apiVersion: v1
kind: Service
metadata:
  annotations:
    kubeadmiral.io/conflict-resolution: adopt
  creationTimestamp: "2023-08-30T02:27:01Z"
  labels:
    run: my-nginx
    kubeadmiral.io/propagation-policy-name: nginx-pp
  name: my-nginx
  namespace: %s
  uid: cc06cd52-1a80-4d3c-8fcf-e416d8c3027d
spec:
  ipFamilies:
  - IPv4
  ipFamilyPolicy: SingleStack
  ports:
  - port: 80
    protocol: TCP
    targetPort: 80
  selector:
    run: my-nginx
  sessionAffinity: None
  type: ClusterIP
status:
  loadBalancer: {}
`

var replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}

// TestAdoptSeed004 takes over seed 004's running Deployment and Service from
// hub copies made with `kubectl get -o yaml`: the pod template must not
// change, so the Deployment's generation stays and no new ReplicaSet appears.
func TestAdoptSeed004(t *testing.T) {
	a := newApplier(t)
	for _, cmp := range []api.ComparisonOptionType{api.ComparisonOptionTypePartialComparison, api.ComparisonOptionTypeFullComparison} {
		t.Run(string(cmp), func(t *testing.T) {
			ns := name(t, "")
			create(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns))
			create(t, fmt.Sprintf(seedMemberDeployment, ns))
			svc := create(t, fmt.Sprintf(seedMemberService, ns))

			// The deployment controller makes the first ReplicaSet.
			var rsBefore []string
			poll.Every(t, step, timeout, "the Deployment's ReplicaSet", func() error {
				if rsBefore = replicaSetNames(t, ns); len(rsBefore) != 1 {
					return fmt.Errorf("ReplicaSets %v, want one", rsBefore)
				}
				return nil
			})
			before := get(t, deployments, ns, "my-nginx")

			report, err := a.Apply(t.Context(), work(t, "nginx-pp", api.ApplyStrategy{
				WhenToTakeOver: api.WhenToTakeOverTypeIfNoDiff, ComparisonOption: cmp,
			}, fmt.Sprintf(seedHubDeployment, ns), fmt.Sprintf(seedHubService, ns)))
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{"Deployment", "Service"} {
				if res := result(t, report, kind, "my-nginx"); res.Applied.Status != "True" {
					t.Errorf("%s not adopted: %s", kind, dump(res))
				}
			}
			if len(report.Takeovers) != 2 || report.Takeovers[0].Outcome != applier.TakenOver || report.Takeovers[1].Outcome != applier.TakenOver {
				t.Errorf("takeovers = %s", dump(report.Takeovers))
			}

			after := get(t, deployments, ns, "my-nginx")
			if after.GetGeneration() != before.GetGeneration() {
				t.Errorf("Deployment generation went from %d to %d: its pods would restart", before.GetGeneration(), after.GetGeneration())
			}
			if !manifest.OwnedBy(after.GetLabels(), "nginx-pp") {
				t.Errorf("Deployment is not marked as owned: labels %v", after.GetLabels())
			}
			for _, k := range []string{api.PropagationPolicyNameLabel} {
				if _, has := after.GetLabels()[k]; has {
					t.Errorf("hub-side control label %s was placed on the member", k)
				}
			}
			if _, has := after.GetAnnotations()[api.ConflictResolutionAnnotation]; has {
				t.Error("hub-side conflict-resolution annotation was placed on the member")
			}
			if rs := replicaSetNames(t, ns); strings.Join(rs, ",") != strings.Join(rsBefore, ",") {
				t.Errorf("ReplicaSets went from %v to %v", rsBefore, rs)
			}
			svcAfter := get(t, services, ns, "my-nginx")
			if ip := nested(t, svcAfter, "spec", "clusterIP"); ip != nested(t, svc, "spec", "clusterIP") {
				t.Errorf("Service cluster IP changed from %v to %v", nested(t, svc, "spec", "clusterIP"), ip)
			}
		})
	}
}

func replicaSetNames(t *testing.T, ns string) []string {
	t.Helper()
	list, err := client(t).Resource(replicaSets).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rs := range list.Items {
		out = append(out, rs.GetName())
	}
	return out
}
