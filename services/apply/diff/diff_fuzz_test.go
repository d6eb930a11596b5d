package diff_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/services/apply/diff"
)

// FuzzCompare compares an arbitrary hub manifest with an arbitrary member
// object (as an apply worker reads it from the member). An object does not
// differ from itself; two objects differ exactly when their digests do (the
// workers skip drift checks on equal digests); at most MaxPerObject
// differences are reported, each at a JSON pointer; and no difference of a
// Secret shows its data.
func FuzzCompare(f *testing.F) {
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"app","labels":{"app":"web","flotilla.dev/managed-by":"flotilla"},"uid":"1","resourceVersion":"7"},"spec":{"replicas":2,"template":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}},"status":{"replicas":2}}`
	f.Add([]byte(deploy), []byte(strings.Replace(deploy, `"replicas":2,`, `"replicas":3,`, 1)))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"password":"aHVudGVyMg=="},"stringData":{"token":"abc"}}`),
		[]byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},"data":{"password":"c2VjcmV0"}}`))
	f.Add([]byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"clusterIP":"10.0.0.1","ports":[{"port":80,"nodePort":30080}]}}`),
		[]byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"clusterIP":"10.0.0.2","ports":[{"port":80}]}}`))
	f.Fuzz(func(t *testing.T, hubData, memberData []byte) {
		if len(hubData)+len(memberData) > 64<<10 {
			return
		}
		hub, member := &unstructured.Unstructured{}, &unstructured.Unstructured{}
		if hub.UnmarshalJSON(hubData) != nil || member.UnmarshalJSON(memberData) != nil {
			return
		}
		if same, err := diff.Compare(hub, hub.DeepCopy()); err != nil || len(same) > 0 {
			t.Fatalf("an object differs from itself: %v, %v", same, err)
		}
		diff.DropAllocated(member, hub)
		diff.DropAllocated(hub, hub)
		details, err := diff.Compare(hub, member)
		if err != nil {
			t.Fatalf("compare: %v", err)
		}
		if (diff.Digest(hub) == diff.Digest(member)) != (len(details) == 0) {
			t.Fatalf("digests equal: %v, but %d differences: %v", diff.Digest(hub) == diff.Digest(member), len(details), details)
		}
		if len(details) > diff.MaxPerObject {
			t.Fatalf("%d differences, over %d", len(details), diff.MaxPerObject)
		}
		secret := func(u *unstructured.Unstructured) bool { return u.GetAPIVersion() == "v1" && u.GetKind() == "Secret" }
		for _, d := range details {
			if d.Path != "" && !strings.HasPrefix(d.Path, "/") {
				t.Fatalf("difference at %q, not a JSON pointer", d.Path)
			}
			dataPath := d.Path == "" || d.Path == "/" || strings.HasPrefix(d.Path, "/data") || strings.HasPrefix(d.Path, "/stringData")
			if (secret(hub) || secret(member)) && dataPath {
				for _, v := range []string{d.ValueInHub, d.ValueInMember} {
					if v != "" && v != diff.Redacted {
						t.Fatalf("a Secret's difference at %q shows %q", d.Path, v)
					}
				}
			}
		}
	})
}
