package stage

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
)

func env(e string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"env": e}}
}

func TestAssignOrdersBySortingLabelThenName(t *testing.T) {
	key := "order"
	stages := []api.StageConfig{
		{Name: "staging", LabelSelector: env("staging")},
		{Name: "prod", LabelSelector: env("prod"), SortingLabelKey: &key},
		{Name: "none"},
	}
	clusters := []Cluster{
		{"s-b", map[string]string{"env": "staging"}},
		{"s-a", map[string]string{"env": "staging"}},
		{"p-a", map[string]string{"env": "prod", "order": "10"}},
		{"p-b", map[string]string{"env": "prod", "order": "2"}},
		{"p-c", map[string]string{"env": "prod"}},
		{"p-d", map[string]string{"env": "prod", "order": "2"}},
	}
	got, err := Assign(stages, clusters)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"s-a", "s-b"}, {"p-b", "p-d", "p-a", "p-c"}, nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Assign = %v, want %v (10 after 2: integers, not strings)", got, want)
	}
}

func TestAssignRefusesOverlapAndOrphans(t *testing.T) {
	all := &metav1.LabelSelector{}
	_, err := Assign([]api.StageConfig{{Name: "a", LabelSelector: all}, {Name: "b", LabelSelector: all}},
		[]Cluster{{"m1", nil}})
	if err == nil || !strings.Contains(err.Error(), "cluster m1 is selected by both stage a and stage b") {
		t.Errorf("overlap: %v", err)
	}
	_, err = Assign([]api.StageConfig{{Name: "a", LabelSelector: env("x")}}, []Cluster{{"m1", nil}})
	if err == nil || !strings.Contains(err.Error(), "no stage selects the scheduled cluster(s) m1") {
		t.Errorf("orphan: %v", err)
	}
}

func TestConcurrency(t *testing.T) {
	for _, tc := range []struct {
		mc   *intstr.IntOrString
		n    int
		want int
	}{
		{nil, 5, 1},
		{ptr(intstr.FromInt32(3)), 5, 3},
		{ptr(intstr.FromString("50%")), 5, 2},
		{ptr(intstr.FromString("10%")), 5, 1},
		{ptr(intstr.FromString("100%")), 4, 4},
	} {
		if got := Concurrency(tc.mc, tc.n); got != tc.want {
			t.Errorf("Concurrency(%v, %d) = %d, want %d", tc.mc, tc.n, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
