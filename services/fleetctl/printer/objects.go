package printer

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Printer prints objects in one output format.
type Printer struct {
	Output Output
	// NoHeaders leaves out the table header.
	NoHeaders bool
	// Now is the clock for ages; time.Now when nil.
	Now func() time.Time
	// AllNamespaces adds the NAMESPACE column to tables of namespaced objects.
	AllNamespaces bool
}

func (p Printer) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// Placements prints placements. single is set when one placement was asked
// for by name: structured formats then print the object itself, otherwise a
// v1 List, as kubectl does.
func (p Printer) Placements(w io.Writer, crps []api.ClusterResourcePlacement, single bool) error {
	return printObjects(p, w, crps, single, kindInfo[api.ClusterResourcePlacement]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterResourcePlacementKind,
		resource: "clusterresourceplacement." + api.PlacementGroupVersion.Group,
		typeMeta: func(c *api.ClusterResourcePlacement) *metav1.TypeMeta { return &c.TypeMeta },
		name:     func(c *api.ClusterResourcePlacement) string { return c.Name },
		columns:  placementColumns, row: placementRow,
	})
}

// ResourcePlacements prints ResourcePlacements (as the status service shows
// them: their own kind, namespace and conditions), with a NAMESPACE column
// when p.AllNamespaces; single as for Placements.
func (p Printer) ResourcePlacements(w io.Writer, rps []api.ClusterResourcePlacement, single bool) error {
	all := p.AllNamespaces
	return printObjects(p, w, rps, single, kindInfo[api.ClusterResourcePlacement]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ResourcePlacementKind,
		resource: "resourceplacement." + api.PlacementGroupVersion.Group,
		typeMeta: func(c *api.ClusterResourcePlacement) *metav1.TypeMeta { return &c.TypeMeta },
		name:     func(c *api.ClusterResourcePlacement) string { return c.Name },
		sortKey:  func(c *api.ClusterResourcePlacement) string { return c.Namespace + "/" + c.Name },
		columns: func(wide bool) []string {
			if all {
				return append([]string{"NAMESPACE"}, placementColumns(wide)...)
			}
			return placementColumns(wide)
		},
		row: func(c *api.ClusterResourcePlacement, now time.Time, wide bool) []string {
			if all {
				return append([]string{c.Namespace}, placementRow(c, now, wide)...)
			}
			return placementRow(c, now, wide)
		},
	})
}

// Members prints member clusters; single as for Placements.
func (p Printer) Members(w io.Writer, members []api.MemberCluster, single bool) error {
	return printObjects(p, w, members, single, kindInfo[api.MemberCluster]{
		apiVersion: api.ClusterGroupVersion.String(), kind: api.MemberClusterKind,
		resource: "membercluster." + api.ClusterGroupVersion.Group,
		typeMeta: func(m *api.MemberCluster) *metav1.TypeMeta { return &m.TypeMeta },
		name:     func(m *api.MemberCluster) string { return m.Name },
		columns:  memberColumns, row: memberRow,
	})
}

// ClusterResourceOverrides prints ClusterResourceOverrides, each in the version
// it was applied in; single as for Placements.
func (p Printer) ClusterResourceOverrides(w io.Writer, os []api.ClusterResourceOverride, single bool) error {
	return printObjects(p, w, os, single, kindInfo[api.ClusterResourceOverride]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterResourceOverrideKind,
		resource: "clusterresourceoverride." + api.PlacementGroupVersion.Group,
		typeMeta: func(o *api.ClusterResourceOverride) *metav1.TypeMeta { return &o.TypeMeta },
		name:     func(o *api.ClusterResourceOverride) string { return o.Name },
		columns:  overrideColumns(false),
		row: func(o *api.ClusterResourceOverride, now time.Time, wide bool) []string {
			return overrideRow(&o.ObjectMeta, o.Spec.Placement, len(o.Spec.ClusterResourceSelectors), o.Spec.Policy, now, wide, false)
		},
	})
}

// ResourceOverrides prints ResourceOverrides, by namespace and name, with a
// NAMESPACE column when p.AllNamespaces; single as for Placements.
func (p Printer) ResourceOverrides(w io.Writer, os []api.ResourceOverride, single bool) error {
	all := p.AllNamespaces
	return printObjects(p, w, os, single, kindInfo[api.ResourceOverride]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ResourceOverrideKind,
		resource: "resourceoverride." + api.PlacementGroupVersion.Group,
		typeMeta: func(o *api.ResourceOverride) *metav1.TypeMeta { return &o.TypeMeta },
		name:     func(o *api.ResourceOverride) string { return o.Name },
		sortKey:  func(o *api.ResourceOverride) string { return o.Namespace + "/" + o.Name },
		columns:  overrideColumns(all),
		row: func(o *api.ResourceOverride, now time.Time, wide bool) []string {
			return overrideRow(&o.ObjectMeta, o.Spec.Placement, len(o.Spec.ResourceSelectors), o.Spec.Policy, now, wide, all)
		},
	})
}

// overrideColumns are kubectl's columns for a kind without printer columns
// (NAME, AGE), and in wide output the placement and how many objects and
// rules the override has.
func overrideColumns(namespaced bool) func(wide bool) []string {
	return func(wide bool) []string {
		c := []string{"NAME", "AGE"}
		if namespaced {
			c = append([]string{"NAMESPACE"}, c...)
		}
		if wide {
			c = append(c, "PLACEMENT", "SELECTED", "RULES")
		}
		return c
	}
}

func overrideRow(m *metav1.ObjectMeta, ref *api.PlacementRef, selected int, policy *api.OverridePolicy, now time.Time, wide, namespaced bool) []string {
	row := []string{m.Name, Age(m.CreationTimestamp, now)}
	if namespaced {
		row = append([]string{m.Namespace}, row...)
	}
	if wide {
		placement, rules := "<all>", 0
		if ref != nil {
			placement = ref.Name
		}
		if policy != nil {
			rules = len(policy.OverrideRules)
		}
		row = append(row, placement, strconv.Itoa(selected), strconv.Itoa(rules))
	}
	return row
}

// kindInfo is what printing needs to know of a kind.
type kindInfo[T any] struct {
	apiVersion, kind string
	// resource prefixes names in -o name, as kubectl writes them.
	resource string
	typeMeta func(*T) *metav1.TypeMeta
	name     func(*T) string
	// sortKey orders the objects; name when nil.
	sortKey func(*T) string
	columns func(wide bool) []string
	row     func(obj *T, now time.Time, wide bool) []string
	// namespace, when set, is the object's namespace: a kind with a
	// namespaced twin (the staged update kinds) prints a NAMESPACE column
	// with p.AllNamespaces, and sorts by namespace and name.
	namespace func(*T) string
}

// printObjects prints objects of one kind, sorted by name, in p's format.
func printObjects[T any](p Printer, w io.Writer, objs []T, single bool, k kindInfo[T]) error {
	objs = slices.Clone(objs)
	for i := range objs {
		setKind(k.typeMeta(&objs[i]), k.apiVersion, k.kind)
	}
	key := k.sortKey
	if key == nil {
		key = k.name
	}
	if k.namespace != nil {
		key = func(o *T) string { return k.namespace(o) + "/" + k.name(o) }
		if p.AllNamespaces {
			columns, row := k.columns, k.row
			k.columns = func(wide bool) []string { return append([]string{"NAMESPACE"}, columns(wide)...) }
			k.row = func(o *T, now time.Time, wide bool) []string {
				return append([]string{k.namespace(o)}, row(o, now, wide)...)
			}
		}
	}
	slices.SortFunc(objs, func(a, b T) int { return strings.Compare(key(&a), key(&b)) })
	switch p.Output.Format {
	case Table, Wide:
		wide, now := p.Output.Format == Wide, p.now()
		rows := make([][]string, 0, len(objs))
		for i := range objs {
			rows = append(rows, k.row(&objs[i], now, wide))
		}
		return p.table(w, k.columns(wide), rows)
	case Name:
		for i := range objs {
			resource := k.resource
			if t := k.typeMeta(&objs[i]); t.Kind != k.kind && t.Kind != "" { // a namespaced twin
				resource = strings.ToLower(t.Kind) + "." + api.PlacementGroupVersion.Group
			}
			fmt.Fprintf(w, "%s/%s\n", resource, k.name(&objs[i]))
		}
		return nil
	}
	if single && len(objs) == 1 {
		return printStructured(w, p.Output, &objs[0])
	}
	return printStructured(w, p.Output, newList(objs))
}

// setKind fills in apiVersion and kind when the answer left them out.
func setKind(t *metav1.TypeMeta, apiVersion, kind string) {
	if t.APIVersion == "" {
		t.APIVersion = apiVersion
	}
	if t.Kind == "" {
		t.Kind = kind
	}
}

func (p Printer) table(w io.Writer, columns []string, rows [][]string) error {
	tw := newTabWriter(w)
	if !p.NoHeaders {
		fmt.Fprintln(tw, strings.Join(columns, "\t"))
	}
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			cells[i] = cell(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cell keeps a value on one line of its column, as kubectl does: cut at the
// first line break, with "..." to show it was cut.
func cell(s string) string {
	if i := strings.IndexAny(s, "\n\r\f"); i >= 0 {
		s = s[:i] + "..."
	}
	return strings.ReplaceAll(s, "\t", " ")
}

// newTabWriter aligns columns as kubectl's printers do.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}

// Age renders the time since t as kubectl's AGE column does.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func placementColumns(wide bool) []string {
	c := []string{"NAME", "GEN", "SCHEDULED", "SCHEDULED-GEN", "AVAILABLE", "AVAILABLE-GEN", "AGE"}
	if wide {
		c = append(c, "APPLIED", "APPLIED-GEN", "POLICY", "CLUSTERS")
	}
	return c
}

// placementRow follows the printer columns of Fleet's CRD: the Scheduled and
// Available conditions with the generation each was observed at; empty when
// a condition is not reported yet.
func placementRow(crp *api.ClusterResourcePlacement, now time.Time, wide bool) []string {
	status := func(t api.ClusterResourcePlacementConditionType) (string, string) {
		c := meta.FindStatusCondition(crp.Status.Conditions, placementConditionType(crp, t))
		if c == nil {
			return "", ""
		}
		return string(c.Status), strconv.FormatInt(c.ObservedGeneration, 10)
	}
	sched, schedGen := status(api.ClusterResourcePlacementScheduledConditionType)
	avail, availGen := status(api.ClusterResourcePlacementAvailableConditionType)
	row := []string{crp.Name, strconv.FormatInt(crp.Generation, 10), sched, schedGen, avail, availGen, Age(crp.CreationTimestamp, now)}
	if wide {
		applied, appliedGen := status(api.ClusterResourcePlacementAppliedConditionType)
		row = append(row, applied, appliedGen, string(crp.Spec.EffectivePlacementType()), strconv.Itoa(len(crp.Status.PlacementStatuses)))
	}
	return row
}

// placementConditionType is t as crp names it: ResourcePlacementApplied for a
// ResourcePlacement's ClusterResourcePlacementApplied.
func placementConditionType(crp *api.ClusterResourcePlacement, t api.ClusterResourcePlacementConditionType) string {
	if crp.IsResourcePlacement() {
		return api.ResourcePlacementConditionType(string(t))
	}
	return string(t)
}

func memberColumns(wide bool) []string {
	c := []string{"NAME", "JOINED", "AGE", "NODE-COUNT", "AVAILABLE-CPU", "AVAILABLE-MEMORY"}
	if wide {
		c = append(c, "ALLOCATABLE-CPU", "ALLOCATABLE-MEMORY")
	}
	return c
}

// memberRow follows the printer columns of Fleet's MemberCluster CRD.
func memberRow(m *api.MemberCluster, now time.Time, wide bool) []string {
	joined := ""
	if c := meta.FindStatusCondition(m.Status.Conditions, string(api.ConditionTypeMemberClusterJoined)); c != nil {
		joined = string(c.Status)
	}
	quantity := func(l api.ResourceList, name string) string {
		if q, ok := l[name]; ok {
			return q.String()
		}
		return ""
	}
	usage := m.Status.ResourceUsage
	row := []string{m.Name, joined, Age(m.CreationTimestamp, now), m.Status.Properties[api.NodeCountProperty].Value,
		quantity(usage.Available, "cpu"), quantity(usage.Available, "memory")}
	if wide {
		row = append(row, quantity(usage.Allocatable, "cpu"), quantity(usage.Allocatable, "memory"))
	}
	return row
}
