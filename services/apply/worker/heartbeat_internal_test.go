package worker

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// TestWithNamespacesReportsTheFirstByName: a heartbeat from the watch lists
// the first api.MaxMemberNamespaces namespaces by name, as a list does,
// with their owners, and keeps the properties of the last full heartbeat.
func TestWithNamespacesReportsTheFirstByName(t *testing.T) {
	var objs []any
	for i := api.MaxMemberNamespaces + 5; i > 0; i-- {
		ns := &unstructured.Unstructured{}
		ns.SetName(fmt.Sprintf("ns-%05d", i))
		if i == 1 {
			ns.SetLabels(map[string]string{manifest.ManagedByLabel: manifest.ManagedByValue, manifest.OwnerLabel("web"): manifest.OwnerValue})
		}
		objs = append(objs, ns)
	}
	last := &events.MemberHeartbeat{Name: "m", Healthy: true, ObservedAt: time.Unix(0, 0).UTC(),
		Properties: map[api.PropertyName]api.PropertyValue{api.NodeCountProperty: {Value: "3"}}}
	now := time.Unix(100, 0)
	hb := withNamespaces(last, objs, now)
	if len(hb.Namespaces) != api.MaxMemberNamespaces {
		t.Fatalf("%d namespaces reported, want %d", len(hb.Namespaces), api.MaxMemberNamespaces)
	}
	if _, ok := hb.Namespaces[fmt.Sprintf("ns-%05d", api.MaxMemberNamespaces+1)]; ok {
		t.Error("a namespace past the first by name is reported")
	}
	if hb.Namespaces["ns-00001"] == "" || hb.Namespaces["ns-00002"] != "" {
		t.Errorf("owners = %q, %q", hb.Namespaces["ns-00001"], hb.Namespaces["ns-00002"])
	}
	if !hb.ObservedAt.Equal(now) || hb.Properties[api.NodeCountProperty].Value != "3" || !hb.Healthy {
		t.Errorf("heartbeat = %+v", hb)
	}
	if last.Namespaces != nil || !last.ObservedAt.Equal(time.Unix(0, 0)) {
		t.Error("the last heartbeat was changed")
	}
}
