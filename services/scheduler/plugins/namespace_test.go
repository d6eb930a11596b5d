package plugins

import (
	"testing"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// TestNamespaceAffinity: a ResourcePlacement goes only to clusters that report
// its namespace; one that reports no namespaces at all is not chosen either;
// a ClusterResourcePlacement is not filtered.
func TestNamespaceAffinity(t *testing.T) {
	with := spec("with")
	with.Namespaces = map[string]string{"team-a": "", "kube-system": ""}
	without := spec("without")
	without.Namespaces = map[string]string{"kube-system": ""}
	silent := spec("silent")

	c, set := fleet(t, &framework.Policy{Type: framework.PickAll, Namespace: "team-a"}, with, without, silent)
	f := NamespaceAffinity{}.Filterer(c)
	if r := f.Filter(get(t, set, "with")); r.Rejected() {
		t.Errorf("a cluster with the namespace is rejected: %s", r)
	}
	if r := f.Filter(get(t, set, "without")); r.Code != framework.ReasonNamespaceNotFound ||
		r.Message != `the cluster does not have the namespace "team-a" of the ResourcePlacement` {
		t.Errorf("a cluster without the namespace: %+v", r)
	}
	if r := f.Filter(get(t, set, "silent")); r.Code != framework.ReasonNamespaceNotFound {
		t.Errorf("a cluster that reports no namespaces: %+v", r)
	}

	c, _ = fleet(t, &framework.Policy{Type: framework.PickAll}, with, without, silent)
	if (NamespaceAffinity{}).Filterer(c) != nil {
		t.Error("a ClusterResourcePlacement is filtered by namespace")
	}
	if got := framework.ReasonNamespaceNotFound.Summary(2); got != "do not have the namespace" {
		t.Errorf("summary = %q", got)
	}
}
