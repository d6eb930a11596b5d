package printer

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Resource names an object for people: "apps/v1 Deployment default/web", the
// envelope that carried it in parentheses.
func Resource(id api.ResourceIdentifier) string {
	gv := id.Version
	if id.Group != "" {
		gv = id.Group + "/" + id.Version
	}
	s := gv + " " + id.Kind + " "
	if id.Namespace != "" {
		s += id.Namespace + "/"
	}
	s += id.Name
	if e := id.Envelope; e != nil {
		s += " (in " + string(e.Type) + " envelope "
		if e.Namespace != "" {
			s += e.Namespace + "/"
		}
		s += e.Name + ")"
	}
	return s
}

// describer writes the indented "Key:  value" layout of kubectl describe.
type describer struct {
	w   io.Writer
	now time.Time
}

func (d describer) line(level int, format string, args ...any) {
	fmt.Fprintf(d.w, strings.Repeat("  ", level)+format+"\n", args...)
}

func (d describer) field(level int, key string, value any) {
	d.line(level, "%s:\t%v", key, value)
}

func (d describer) metadata(m metav1.ObjectMeta, t metav1.TypeMeta) {
	d.field(0, "Name", m.Name)
	if m.Namespace != "" {
		d.field(0, "Namespace", m.Namespace) // as kubectl describe, after the name
	}
	d.mapField(0, "Labels", m.Labels)
	d.mapField(0, "Annotations", m.Annotations)
	d.field(0, "API Version", t.APIVersion)
	d.field(0, "Kind", t.Kind)
	if m.Generation != 0 {
		d.field(0, "Generation", m.Generation)
	}
	if !m.CreationTimestamp.IsZero() {
		d.field(0, "Created", d.when(m.CreationTimestamp))
	}
}

func (d describer) mapField(level int, key string, m map[string]string) {
	if len(m) == 0 {
		d.field(level, key, "<none>")
		return
	}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i == 0 {
			d.field(level, key, k+"="+m[k])
		} else {
			d.line(level, "\t%s=%s", k, m[k])
		}
	}
}

// when renders a time with its age: "2026-11-21T12:00:00Z (5m ago)".
func (d describer) when(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return t.UTC().Format(time.RFC3339) + " (" + Age(t, d.now) + " ago)"
}

// conditions prints a condition table.
func (d describer) conditions(level int, conds []metav1.Condition) {
	if len(conds) == 0 {
		d.field(level, "Conditions", "<none>")
		return
	}
	d.line(level, "Conditions:")
	pad := strings.Repeat("  ", level+1)
	tw := newTabWriter(d.w)
	fmt.Fprintf(tw, "%sTYPE\tSTATUS\tREASON\tGEN\tSINCE\tMESSAGE\n", pad)
	for _, c := range conds {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%s\t%s\n", pad, c.Type, c.Status, c.Reason, c.ObservedGeneration,
			Age(c.LastTransitionTime, d.now), oneLine(c.Message))
	}
	tw.Flush()
}

// oneLine keeps a message on its table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// DescribePlacement prints a placement for people: its spec in short, then
// its conditions and, per cluster, the cluster's conditions and the objects
// that failed, drifted or differ.
func (p Printer) DescribePlacement(w io.Writer, crp *api.ClusterResourcePlacement) error {
	c := *crp
	setKind(&c.TypeMeta, api.PlacementGroupVersion.String(), api.ClusterResourcePlacementKind)
	tw := newTabWriter(w)
	d := describer{w: tw, now: p.now()}
	d.metadata(c.ObjectMeta, c.TypeMeta)
	if err := tw.Flush(); err != nil {
		return err
	}

	d.line(0, "Spec:")
	d.line(1, "Resource Selectors:")
	for _, s := range c.Spec.ResourceSelectors {
		d.line(2, "%s", selector(s))
	}
	d.field(1, "Policy", policy(c.Spec.Policy))
	d.field(1, "Strategy", strategy(c.Spec.Strategy))
	if as := c.Spec.Strategy.ApplyStrategy; as != nil {
		d.field(1, "Apply Strategy", applyStrategy(as))
	}
	if ds := c.Spec.Strategy.DeleteStrategy; ds != nil && ds.PropagationPolicy != "" {
		d.field(1, "Delete Strategy", ds.PropagationPolicy)
	}
	if l := c.Spec.RevisionHistoryLimit; l != nil {
		d.field(1, "Revision History Limit", *l)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	st := c.Status
	d.line(0, "Status:")
	if st.ObservedResourceIndex != "" {
		d.field(1, "Observed Resource Index", st.ObservedResourceIndex)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	d.conditions(1, st.Conditions)
	if len(st.SelectedResources) == 0 {
		d.field(1, "Selected Resources", "<none>")
	} else {
		d.line(1, "Selected Resources (%d):", len(st.SelectedResources))
		for _, r := range st.SelectedResources {
			d.line(2, "%s", Resource(r))
		}
	}
	if len(st.PlacementStatuses) == 0 {
		d.field(1, "Placement Statuses", "<none>")
	} else {
		d.line(1, "Placement Statuses:")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ps := range st.PlacementStatuses {
		d.clusterStatus(ps)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return tw.Flush()
}

func (d describer) clusterStatus(ps api.ResourcePlacementStatus) {
	name := ps.ClusterName
	if name == "" {
		name = "<no cluster>"
	}
	d.line(2, "Cluster %s:", name)
	if ps.ObservedResourceIndex != "" {
		d.field(3, "Observed Resource Index", ps.ObservedResourceIndex)
	}
	d.conditions(3, ps.Conditions)
	if n := len(ps.FailedPlacements); n > 0 {
		d.line(3, "Failed Placements (%d):", n)
		for _, f := range ps.FailedPlacements {
			d.line(4, "%s: %s %s %s: %s", Resource(f.ResourceIdentifier), f.Condition.Type, f.Condition.Status, f.Condition.Reason, oneLine(f.Condition.Message))
		}
	}
	if n := len(ps.DriftedPlacements); n > 0 {
		d.line(3, "Drifted Placements (%d):", n)
		for _, f := range ps.DriftedPlacements {
			d.line(4, "%s (member generation %d, drifted since %s, observed %s):", Resource(f.ResourceIdentifier),
				f.TargetClusterObservedGeneration, d.when(f.FirstDriftedObservedTime), d.when(f.ObservationTime))
			d.patches(5, f.ObservedDrifts)
		}
	}
	if n := len(ps.DiffedPlacements); n > 0 {
		d.line(3, "Diffed Placements (%d):", n)
		for _, f := range ps.DiffedPlacements {
			gen := "object missing on the member"
			if f.TargetClusterObservedGeneration != nil {
				gen = "member generation " + strconv.FormatInt(*f.TargetClusterObservedGeneration, 10)
			}
			d.line(4, "%s (%s, differs since %s, observed %s):", Resource(f.ResourceIdentifier),
				gen, d.when(f.FirstDiffedObservedTime), d.when(f.ObservationTime))
			d.patches(5, f.ObservedDiffs)
		}
	}
}

func (d describer) patches(level int, ps []api.PatchDetail) {
	for _, p := range ps {
		d.line(level, "%s", Patch(p))
	}
}

// Patch renders one differing field: `/spec/replicas: hub "2", member "3"`.
func Patch(p api.PatchDetail) string {
	value := func(v string) string {
		if v == "" {
			return "<absent>"
		}
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s: hub %s, member %s", p.Path, value(p.ValueInHub), value(p.ValueInMember))
}

func selector(s api.ClusterResourceSelector) string {
	gv := s.Version
	if s.Group != "" {
		gv = s.Group + "/" + s.Version
	}
	out := gv + " " + s.Kind
	switch {
	case s.Name != "":
		out += " named " + s.Name
	case s.LabelSelector != nil:
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			out += " with an invalid label selector"
		} else {
			out += " with labels " + sel.String()
		}
	default:
		out += " (all)"
	}
	return out
}

func policy(p *api.PlacementPolicy) string {
	if p == nil {
		return string(api.PickAllPlacementType)
	}
	typ := p.PlacementType
	if typ == "" {
		typ = api.PickAllPlacementType
	}
	out := string(typ)
	switch {
	case typ == api.PickFixedPlacementType:
		out += " " + strings.Join(p.ClusterNames, ", ")
	case typ == api.PickNPlacementType && p.NumberOfClusters != nil:
		out += fmt.Sprintf(" %d cluster(s)", *p.NumberOfClusters)
	}
	var extra []string
	if a := p.Affinity; a != nil && a.ClusterAffinity != nil {
		if r := a.ClusterAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil && len(r.ClusterSelectorTerms) > 0 {
			extra = append(extra, fmt.Sprintf("%d required affinity term(s)", len(r.ClusterSelectorTerms)))
		}
		if n := len(a.ClusterAffinity.PreferredDuringSchedulingIgnoredDuringExecution); n > 0 {
			extra = append(extra, fmt.Sprintf("%d preferred affinity term(s)", n))
		}
	}
	if n := len(p.TopologySpreadConstraints); n > 0 {
		extra = append(extra, fmt.Sprintf("%d topology spread constraint(s)", n))
	}
	if n := len(p.Tolerations); n > 0 {
		extra = append(extra, fmt.Sprintf("%d toleration(s)", n))
	}
	if len(extra) > 0 {
		out += " (" + strings.Join(extra, ", ") + ")"
	}
	return out
}

func strategy(s api.RolloutStrategy) string {
	typ := s.Type
	if typ == "" {
		typ = api.RollingUpdateRolloutStrategyType
	}
	out := string(typ)
	if ru := s.RollingUpdate; ru != nil {
		var parts []string
		if ru.MaxUnavailable != nil {
			parts = append(parts, "maxUnavailable "+ru.MaxUnavailable.String())
		}
		if ru.MaxSurge != nil {
			parts = append(parts, "maxSurge "+ru.MaxSurge.String())
		}
		if ru.UnavailablePeriodSeconds != nil {
			parts = append(parts, fmt.Sprintf("unavailablePeriodSeconds %d", *ru.UnavailablePeriodSeconds))
		}
		if len(parts) > 0 {
			out += " (" + strings.Join(parts, ", ") + ")"
		}
	}
	return out
}

func applyStrategy(as *api.ApplyStrategy) string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("type", string(as.Type))
	add("whenToTakeOver", string(as.WhenToTakeOver))
	add("comparisonOption", string(as.ComparisonOption))
	add("whenToApply", string(as.WhenToApply))
	if as.AllowCoOwnership {
		parts = append(parts, "allowCoOwnership")
	}
	if as.ServerSideApplyConfig != nil && as.ServerSideApplyConfig.ForceConflicts {
		parts = append(parts, "force")
	}
	return strings.Join(parts, ", ")
}

// DescribeMember prints a member cluster for people.
func (p Printer) DescribeMember(w io.Writer, m *api.MemberCluster) error {
	mc := *m
	setKind(&mc.TypeMeta, api.ClusterGroupVersion.String(), api.MemberClusterKind)
	tw := newTabWriter(w)
	d := describer{w: tw, now: p.now()}
	d.metadata(mc.ObjectMeta, mc.TypeMeta)
	d.field(0, "Heartbeat Period Seconds", mc.Spec.HeartbeatPeriodSeconds)
	if len(mc.Spec.Taints) == 0 {
		d.field(0, "Taints", "<none>")
	} else {
		d.line(0, "Taints:")
		for _, t := range mc.Spec.Taints {
			d.line(1, "%s=%s:%s", t.Key, t.Value, t.Effect)
		}
	}
	if len(mc.Status.Properties) > 0 {
		d.line(0, "Properties:")
		for _, k := range slices.Sorted(maps.Keys(mc.Status.Properties)) {
			d.field(1, string(k), mc.Status.Properties[k].Value)
		}
	}
	u := mc.Status.ResourceUsage
	for _, r := range []struct {
		name string
		list api.ResourceList
	}{{"Capacity", u.Capacity}, {"Allocatable", u.Allocatable}, {"Available", u.Available}} {
		if len(r.list) == 0 {
			continue
		}
		d.line(0, "%s:", r.name)
		for _, k := range slices.Sorted(maps.Keys(r.list)) {
			q := r.list[k]
			d.field(1, k, q.String())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	d.conditions(0, mc.Status.Conditions)
	return tw.Flush()
}
