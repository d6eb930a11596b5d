package printer

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Evictions prints ClusterResourcePlacementEvictions with upstream's printer
// columns (VALID, EXECUTED); wide output adds the placement and the cluster.
func (p Printer) Evictions(w io.Writer, es []api.ClusterResourcePlacementEviction, single bool) error {
	return printObjects(p, w, es, single, kindInfo[api.ClusterResourcePlacementEviction]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterResourcePlacementEvictionKind,
		resource: "clusterresourceplacementeviction." + api.PlacementGroupVersion.Group,
		typeMeta: func(e *api.ClusterResourcePlacementEviction) *metav1.TypeMeta { return &e.TypeMeta },
		name:     func(e *api.ClusterResourcePlacementEviction) string { return e.Name },
		columns: func(wide bool) []string {
			c := []string{"NAME", "VALID", "EXECUTED", "AGE"}
			if wide {
				c = append(c, "PLACEMENT", "CLUSTER")
			}
			return c
		},
		row: func(e *api.ClusterResourcePlacementEviction, now time.Time, wide bool) []string {
			row := []string{e.Name, condStatus(e.Status.Conditions, api.EvictionConditionValid),
				condStatus(e.Status.Conditions, api.EvictionConditionExecuted), Age(e.CreationTimestamp, now)}
			if wide {
				row = append(row, e.Spec.PlacementName, e.Spec.ClusterName)
			}
			return row
		},
	})
}

// DisruptionBudgets prints ClusterResourcePlacementDisruptionBudgets: upstream
// has no printer columns for them; NAME, MAX-UNAVAILABLE, MIN-AVAILABLE, AGE.
func (p Printer) DisruptionBudgets(w io.Writer, bs []api.ClusterResourcePlacementDisruptionBudget, single bool) error {
	return printObjects(p, w, bs, single, kindInfo[api.ClusterResourcePlacementDisruptionBudget]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterResourcePlacementDisruptionBudgetKind,
		resource: "clusterresourceplacementdisruptionbudget." + api.PlacementGroupVersion.Group,
		typeMeta: func(b *api.ClusterResourcePlacementDisruptionBudget) *metav1.TypeMeta { return &b.TypeMeta },
		name:     func(b *api.ClusterResourcePlacementDisruptionBudget) string { return b.Name },
		columns: func(bool) []string {
			return []string{"NAME", "MAX-UNAVAILABLE", "MIN-AVAILABLE", "AGE"}
		},
		row: func(b *api.ClusterResourcePlacementDisruptionBudget, now time.Time, _ bool) []string {
			return []string{b.Name, intOrNone(b.Spec.MaxUnavailable), intOrNone(b.Spec.MinAvailable), Age(b.CreationTimestamp, now)}
		},
	})
}

func intOrNone(v *intstr.IntOrString) string {
	if v == nil {
		return "<none>"
	}
	return v.String()
}

// DescribeEviction prints an eviction for people: what it targets and its
// conditions.
func (p Printer) DescribeEviction(w io.Writer, e *api.ClusterResourcePlacementEviction) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", e.Name)
	fmt.Fprintf(tw, "Placement:\t%s\n", e.Spec.PlacementName)
	fmt.Fprintf(tw, "Cluster:\t%s\n", e.Spec.ClusterName)
	fmt.Fprintf(tw, "Age:\t%s\n", Age(e.CreationTimestamp, p.now()))
	fmt.Fprintln(tw, "Conditions:")
	describeConditions(tw, "  ", e.Status.Conditions)
	return tw.Flush()
}

// DescribeDisruptionBudget prints a budget for people.
func (p Printer) DescribeDisruptionBudget(w io.Writer, b *api.ClusterResourcePlacementDisruptionBudget) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", b.Name)
	fmt.Fprintf(tw, "Placement:\t%s\n", b.Name)
	if b.Spec.MaxUnavailable != nil {
		fmt.Fprintf(tw, "Max Unavailable:\t%s\n", b.Spec.MaxUnavailable.String())
	}
	if b.Spec.MinAvailable != nil {
		fmt.Fprintf(tw, "Min Available:\t%s\n", b.Spec.MinAvailable.String())
	}
	fmt.Fprintf(tw, "Age:\t%s\n", Age(b.CreationTimestamp, p.now()))
	return tw.Flush()
}
