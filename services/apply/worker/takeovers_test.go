package worker_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestAdoptingManyObjectsRecordsEveryDecision: a placement that takes over
// 150 ConfigMaps already on the member is reported with 100 takeover
// decisions, and the other 51 (the namespace too) follow in
// TakeoversDecided events: none is lost, none is sent twice.
func TestAdoptingManyObjectsRecordsEveryDecision(t *testing.T) {
	f := newFleet(t)
	f.start(member, nil)
	placement := name(t, "crp")
	ns := name(t, "")
	const objects = 150
	c := client(t, member)
	if _, err := c.Resource(namespaces).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manifests := []string{nsYAML(ns)}
	for i := range objects {
		n := fmt.Sprintf("existing-%03d", i)
		if _, err := c.Resource(configMaps).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": n, "namespace": ns},
			"data": map[string]any{"key": "1"}}}, metav1.CreateOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, configMapYAML(ns, n, "1"))
	}
	f.desire(work(t, member, placement, api.ApplyStrategy{WhenToTakeOver: api.WhenToTakeOverTypeAlways}, manifests...))

	r := f.waitReport(member, placement, "applied", applied)
	if len(r.Takeovers) != events.MaxReportTakeovers || r.Counts == nil || r.Counts.Total != objects+1 {
		t.Fatalf("the report carries %d takeover decisions and counts %+v; want %d and %d manifests",
			len(r.Takeovers), r.Counts, events.MaxReportTakeovers, objects+1)
	}
	decided := map[string]int{}
	for _, d := range r.Takeovers {
		decided[d.Resource.Kind+"/"+d.Resource.Name]++
	}
	poll.Every(t, 50*time.Millisecond, timeout, "every takeover decision", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := len(r.Takeovers)
		for _, d := range f.takeovers {
			n += len(d.Takeovers)
		}
		if n != objects+1 {
			return fmt.Errorf("%d decisions, want %d", n, objects+1)
		}
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.takeovers {
		for _, x := range d.Takeovers {
			decided[x.Resource.Kind+"/"+x.Resource.Name]++
		}
	}
	for k, n := range decided {
		if n != 1 || len(decided) != objects+1 {
			t.Errorf("%s decided %d times; %d objects decided, want %d once each", k, n, len(decided), objects+1)
			break
		}
	}
}
