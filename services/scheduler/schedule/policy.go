package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CompilePolicy compiles a placement's policy for Decide: it applies the
// defaults, parses selectors and quantities once, and computes the policy key.
// A nil policy is PickAll over every cluster. It reports every problem found.
func CompilePolicy(p *api.PlacementPolicy) (*framework.Policy, error) {
	if p == nil {
		p = &api.PlacementPolicy{}
	}
	out := &framework.Policy{Type: framework.PlacementType(p.PlacementType), Key: PolicyKey(p)}
	if out.Type == "" {
		out.Type = framework.PickAll
	}
	c := &policyCompiler{out: out}
	c.placementType(p)
	if p.Affinity != nil && p.Affinity.ClusterAffinity != nil {
		c.affinity(p.Affinity.ClusterAffinity)
	}
	c.spread(p.TopologySpreadConstraints)
	c.tolerations(p.Tolerations)
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("compile scheduling policy: %w", errors.Join(c.errs...))
	}
	return out, nil
}

// policyCompiler fills a compiled policy and collects every problem found on
// the way.
type policyCompiler struct {
	out  *framework.Policy
	errs []error
}

func (c *policyCompiler) bad(field, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("policy.%s: %s", field, fmt.Sprintf(format, args...)))
}

// placementType checks the placement type and the fields only some types
// take.
func (c *policyCompiler) placementType(p *api.PlacementPolicy) {
	out := c.out
	switch out.Type {
	case framework.PickAll, framework.PickFixed, framework.PickN:
	default:
		c.bad("placementType", "unknown placement type %q (want PickAll, PickFixed or PickN)", p.PlacementType)
	}
	if p.NumberOfClusters != nil {
		switch {
		case out.Type != framework.PickN:
			c.bad("numberOfClusters", "only PickN takes a number of clusters")
		case *p.NumberOfClusters < 0:
			c.bad("numberOfClusters", "must not be negative, got %d", *p.NumberOfClusters)
		default:
			out.NumberOfClusters = int(*p.NumberOfClusters)
		}
	} else if out.Type == framework.PickN {
		c.bad("numberOfClusters", "PickN needs a number of clusters")
	}
	if len(p.ClusterNames) > 0 && out.Type != framework.PickFixed {
		c.bad("clusterNames", "only PickFixed takes cluster names")
	}
	if out.Type == framework.PickFixed {
		out.ClusterNames = slices.Compact(slices.Sorted(slices.Values(p.ClusterNames)))
	}
	if len(p.TopologySpreadConstraints) > 0 && out.Type != framework.PickN {
		c.bad("topologySpreadConstraints", "only PickN takes topology spread constraints")
	}
}

// affinity compiles the required and preferred cluster selector terms.
func (c *policyCompiler) affinity(ca *api.ClusterAffinity) {
	if c.out.Type == framework.PickFixed {
		c.bad("affinity", "PickFixed takes no affinity")
	}
	if req := ca.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i := range req.ClusterSelectorTerms {
			field := fmt.Sprintf("affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[%d]", i)
			t := &req.ClusterSelectorTerms[i]
			if t.PropertySorter != nil {
				c.bad(field+".propertySorter", "a required term cannot sort")
			}
			term, err := compileTerm(t)
			if err != nil {
				c.bad(field, "%v", err)
				continue
			}
			c.out.Required = append(c.out.Required, term)
		}
	}
	for i := range ca.PreferredDuringSchedulingIgnoredDuringExecution {
		field := fmt.Sprintf("affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d]", i)
		c.preferred(field, &ca.PreferredDuringSchedulingIgnoredDuringExecution[i])
	}
}

// preferred compiles one preferred term, with its weight and sorter.
func (c *policyCompiler) preferred(field string, pref *api.PreferredClusterSelector) {
	if pref.Weight < -100 || pref.Weight > 100 {
		c.bad(field+".weight", "must be within [-100, 100], got %d", pref.Weight)
	}
	term, err := compileTerm(&pref.Preference)
	if err != nil {
		c.bad(field+".preference", "%v", err)
		return
	}
	cp := framework.Preference{Weight: pref.Weight, Term: term}
	if s := pref.Preference.PropertySorter; s != nil {
		order := framework.SortOrder(s.SortOrder)
		if order != framework.Ascending && order != framework.Descending {
			c.bad(field+".preference.propertySorter.sortOrder", "unknown sort order %q (want Ascending or Descending)", s.SortOrder)
		}
		cp.Sorter = &framework.PropertySorter{Name: s.Name, Order: order}
	}
	c.out.Preferred = append(c.out.Preferred, cp)
}

// spread compiles the topology spread constraints, defaulting max skew 1
// and DoNotSchedule.
func (c *policyCompiler) spread(constraints []api.TopologySpreadConstraint) {
	for i, tc := range constraints {
		field := fmt.Sprintf("topologySpreadConstraints[%d]", i)
		sc := framework.SpreadConstraint{MaxSkew: 1, TopologyKey: tc.TopologyKey, WhenUnsatisfiable: framework.DoNotSchedule}
		if tc.MaxSkew != nil {
			sc.MaxSkew = int(*tc.MaxSkew)
		}
		if sc.MaxSkew < 1 {
			c.bad(field+".maxSkew", "must be at least 1, got %d", sc.MaxSkew)
		}
		if tc.TopologyKey == "" {
			c.bad(field+".topologyKey", "must not be empty")
		}
		switch tc.WhenUnsatisfiable {
		case "", api.DoNotSchedule:
		case api.ScheduleAnyway:
			sc.WhenUnsatisfiable = framework.ScheduleAnyway
		default:
			c.bad(field+".whenUnsatisfiable", "unknown action %q (want DoNotSchedule or ScheduleAnyway)", tc.WhenUnsatisfiable)
		}
		c.out.Spread = append(c.out.Spread, sc)
	}
}

// tolerations compiles the tolerations, which let the placement land on
// tainted members.
func (c *policyCompiler) tolerations(tolerations []api.Toleration) {
	for i, t := range tolerations {
		field := fmt.Sprintf("tolerations[%d]", i)
		switch t.Operator {
		case "", api.TolerationOpEqual, api.TolerationOpExists:
		default:
			c.bad(field+".operator", "unknown operator %q (want Equal or Exists)", t.Operator)
		}
		if t.Key == "" && t.Operator != api.TolerationOpExists {
			c.bad(field+".key", "an empty key needs operator Exists")
		}
		c.out.Tolerations = append(c.out.Tolerations, framework.Toleration{
			Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect),
		})
	}
}

func compileTerm(t *api.ClusterSelectorTerm) (framework.Term, error) {
	var term framework.Term
	if t.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return term, fmt.Errorf("labelSelector: %w", err)
		}
		term.Labels = sel
	}
	if t.PropertySelector != nil {
		for i, e := range t.PropertySelector.MatchExpressions {
			switch framework.PropertyOperator(e.Operator) {
			case framework.OpGt, framework.OpGe, framework.OpEq, framework.OpNe, framework.OpLt, framework.OpLe:
			default:
				return term, fmt.Errorf("propertySelector.matchExpressions[%d].operator: unknown operator %q (want Gt, Ge, Eq, Ne, Lt or Le)", i, e.Operator)
			}
			if len(e.Values) != 1 {
				return term, fmt.Errorf("propertySelector.matchExpressions[%d].values: want exactly one value, got %d", i, len(e.Values))
			}
			q, err := resource.ParseQuantity(e.Values[0])
			if err != nil {
				return term, fmt.Errorf("propertySelector.matchExpressions[%d].values[0]: %q is not a quantity: %w", i, e.Values[0], err)
			}
			term.Properties = append(term.Properties, framework.PropertyRequirement{
				Name: e.Name, Operator: framework.PropertyOperator(e.Operator), Value: q,
			})
		}
	}
	return term, nil
}

// PolicyKey identifies a policy for stickiness: two policies with one key
// schedule alike except for numberOfClusters. Defaults are applied first and
// cluster names sorted, so spelling a default out does not change the key.
// Resource selectors and the rollout strategy are not part of the policy, so
// changing them never reschedules.
func PolicyKey(p *api.PlacementPolicy) string {
	var c api.PlacementPolicy
	if p != nil {
		c = *p
	}
	c.NumberOfClusters = nil
	if c.PlacementType == "" {
		c.PlacementType = api.PickAllPlacementType
	}
	c.ClusterNames = slices.Compact(slices.Sorted(slices.Values(c.ClusterNames)))
	c.TopologySpreadConstraints = slices.Clone(c.TopologySpreadConstraints)
	for i := range c.TopologySpreadConstraints {
		tsc := &c.TopologySpreadConstraints[i]
		if tsc.MaxSkew == nil {
			one := int32(1)
			tsc.MaxSkew = &one
		}
		if tsc.WhenUnsatisfiable == "" {
			tsc.WhenUnsatisfiable = api.DoNotSchedule
		}
	}
	c.Tolerations = slices.Clone(c.Tolerations)
	for i := range c.Tolerations {
		if c.Tolerations[i].Operator == "" {
			c.Tolerations[i].Operator = api.TolerationOpEqual
		}
	}
	// Marshalling plain structs, string-keyed maps and slices cannot fail.
	b, _ := json.Marshal(&c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// MemberSpecFrom converts a MemberCluster into what the scheduler needs: name,
// labels, taints, heartbeat period and properties (the reported properties,
// plus resources.kubernetes-fleet.io/<total|allocatable|available>-<resource>
// from the resource usage unless reported as properties). Whether the member
// has joined or is leaving, and when it last beat, come from member events, not
// the object: the caller sets Joined, Leaving and LastHeartbeat.
func MemberSpecFrom(mc *api.MemberCluster) framework.MemberSpec {
	spec := framework.MemberSpec{
		Name:            mc.Name,
		Labels:          mc.Labels,
		HeartbeatPeriod: time.Duration(mc.Spec.HeartbeatPeriodSeconds) * time.Second,
	}
	for _, t := range mc.Spec.Taints {
		spec.Taints = append(spec.Taints, framework.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	props := make(map[string]string, len(mc.Status.Properties)+6)
	usage := []struct {
		capacity string
		list     api.ResourceList
	}{
		{api.TotalCapacityName, mc.Status.ResourceUsage.Capacity},
		{api.AllocatableCapacityName, mc.Status.ResourceUsage.Allocatable},
		{api.AvailableCapacityName, mc.Status.ResourceUsage.Available},
	}
	for _, u := range usage {
		for res, q := range u.list {
			props[api.ResourcePropertyPrefix+u.capacity+"-"+res] = q.String()
		}
	}
	for name, v := range mc.Status.Properties {
		props[string(name)] = v.Value
	}
	spec.Properties = props
	spec.Namespaces = mc.Status.Namespaces
	return spec
}
