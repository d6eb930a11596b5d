package worker_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// TestReportDiffFollowsTheMember: a ReportDiff placement's differences are
// reported again when the member object changes (a watch), not at the next
// resync, which this worker puts an hour away.
func TestReportDiffFollowsTheMember(t *testing.T) {
	f := newFleet(t)
	f.start(member, func(c *worker.Config) { c.ResyncPeriod = time.Hour })
	placement, ns := name(t, "crp"), name(t, "")
	c := client(t, member)
	if _, err := c.Resource(namespaces).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": ns}, "data": map[string]any{"key": "member"}}}
	if _, err := c.Resource(configMaps).Namespace(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	diffs := func(r *events.WorkReported) int {
		res, ok := result(r, "ConfigMap", "settings")
		if !ok {
			return -1
		}
		return len(res.Diffs)
	}
	f.desire(work(t, member, placement, api.ApplyStrategy{Type: api.ApplyStrategyTypeReportDiff}, configMapYAML(ns, "settings", "hub")))
	f.waitReport(member, placement, "the difference in key", func(r *events.WorkReported) bool { return diffs(r) == 1 })

	mark := f.mark()
	live := get(t, member, configMaps, ns, "settings")
	_ = unstructured.SetNestedField(live.Object, "hub", "data", "key")
	if _, err := c.Resource(configMaps).Namespace(ns).Update(t.Context(), live, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	f.waitReportAfter(mark, member, placement, "no difference once the member matches", func(r *events.WorkReported) bool { return diffs(r) == 0 })
}
