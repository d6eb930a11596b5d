package api

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestStripServerFields(t *testing.T) {
	tests := []struct {
		name, in, want string
		removed        bool
	}{
		{
			name: "deployment from kubectl get -o yaml (seed 004)",
			in:   "004-4.reindented.yaml",
			want: `apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    deployment.kubernetes.io/revision: "1"
  name: my-nginx
  namespace: default
spec:
  progressDeadlineSeconds: 600
  replicas: 2
  revisionHistoryLimit: 10
  selector: {matchLabels: {run: my-nginx}}
  strategy:
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
    type: RollingUpdate
  template:
    metadata:
      labels: {run: my-nginx}
    spec:
      containers:
      - image: nginx
        imagePullPolicy: Always
        name: my-nginx
        ports: [{containerPort: 80, protocol: TCP}]
        resources: {}
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
`,
			removed: true,
		},
		{
			name: "service from kubectl get -o yaml (seed 004)",
			in:   "004-5.reindented.yaml",
			want: `apiVersion: v1
kind: Service
metadata:
  labels: {run: my-nginx}
  name: my-nginx
  namespace: default
spec:
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  ports: [{port: 80, protocol: TCP, targetPort: 80}]
  selector: {run: my-nginx}
  sessionAffinity: None
  type: ClusterIP
`,
			removed: true,
		},
		{
			name: "headless service keeps clusterIP None",
			in: `apiVersion: v1
kind: Service
metadata: {name: db, uid: x, managedFields: [{manager: kubectl}], selfLink: /x, deletionTimestamp: "2024-01-01T00:00:00Z", deletionGracePeriodSeconds: 30}
spec: {clusterIP: None, clusterIPs: [None]}
`,
			want: `apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None, clusterIPs: [None]}
`,
			removed: true,
		},
		{
			name:    "clean manifest is left alone",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {keep: me}}\ndata: {clusterIP: x}\n",
			want:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, annotations: {keep: me}}\ndata: {clusterIP: x}\n",
			removed: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if filepath.Ext(tt.in) == ".yaml" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", "seeds", tt.in)); err != nil {
					t.Fatal(err)
				}
			}
			obj, err := Decode(in)
			if err != nil {
				t.Fatal(err)
			}
			u := obj.(*unstructured.Unstructured)
			if got := StripServerFields(u); got != tt.removed {
				t.Errorf("StripServerFields reported %v, want %v", got, tt.removed)
			}
			var want map[string]any
			if err := sigsyaml.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := u.MarshalJSON()
			var got map[string]any
			_ = sigsyaml.Unmarshal(gotJSON, &got)
			if !reflect.DeepEqual(got, want) {
				gotYAML, _ := sigsyaml.Marshal(got)
				t.Errorf("stripped object:\n%s\nwant:\n%s", gotYAML, tt.want)
			}
		})
	}
}
