// Package override applies ClusterResourceOverrides and ResourceOverrides to a
// placement's manifests for one member cluster, as upstream Fleet's work
// generator does:
//
//   - An override concerns a placement when it names that placement or none,
//     and selects one of the placement's objects (inside envelopes too).
//   - A ClusterResourceOverride selects cluster-scoped objects by name; one
//     that selects a Namespace applies to the Namespace and to every object
//     in it. A ResourceOverride selects objects of its namespace by name.
//   - On a cluster, an override's rules apply in order when their cluster
//     selector matches the cluster (nil: no cluster; no terms: every cluster;
//     terms ORed): a JSONPatch rule patches the object (the variables
//     ${MEMBER-CLUSTER-NAME} and ${MEMBER-CLUSTER-LABEL-KEY-<key>} in a value
//     become the cluster's name and label value), a Delete rule keeps it off
//     the cluster. ClusterResourceOverrides apply first, so that where both
//     change a field the ResourceOverride wins; within an override, the last
//     rule wins.
//   - A patch that cannot apply (its path does not exist, a label the cluster
//     lacks) fails the cluster's whole work, naming the override, the object,
//     the patch and the path; other clusters are not concerned.
//
// It is pure: no I/O, no clock.
package override

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Snapshot is an override as a resource snapshot holds it: the override and
// the index of its version (its changes counted from 0), which names it as
// upstream names its override snapshots.
type Snapshot struct {
	api.Override
	Index int64 `json:"index"`
}

// Name is upstream's name of the override snapshot: <override>-<index>.
func (s Snapshot) Name() string { return fmt.Sprintf("%s-%d", s.Key.Name, s.Index) }

// Cluster is what override rules see of a member cluster.
type Cluster struct {
	Name   string
	Labels map[string]string
}

// Applicable returns the overrides of all that concern the placement: those for
// it (or for every placement) that select one of its manifests or an object an
// envelope among them wraps; in the order they apply (api.SortOverrides).
func Applicable(placement string, manifests []json.RawMessage, all []Snapshot) []Snapshot {
	var candidates []Snapshot
	for _, o := range all {
		if o.ForPlacement(placement) {
			candidates = append(candidates, o)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	selected := map[string]bool{}
	for _, m := range manifests {
		for _, obj := range objectsOf(m) {
			for _, k := range obj.keys() {
				selected[k] = true
			}
		}
	}
	var out []Snapshot
	for _, o := range candidates {
		if slices.ContainsFunc(o.Targets, func(t api.ResourceIdentifier) bool { return selected[targetKey(o.Key.Kind, t)] }) {
			out = append(out, o)
		}
	}
	sortSnapshots(out)
	return out
}

func sortSnapshots(s []Snapshot) {
	os := make([]api.Override, len(s))
	byKey := map[api.OverrideKey]Snapshot{}
	for i, o := range s {
		os[i] = o.Override
		byKey[o.Key] = o
	}
	api.SortOverrides(os)
	for i, o := range os {
		s[i] = byKey[o.Key]
	}
}

// Result is what a cluster's overrides did to its manifests.
type Result struct {
	// Manifests are the manifests for the cluster: the ones given when no
	// override applies there.
	Manifests []json.RawMessage
	// Changed is true when some override changed or removed a manifest.
	Changed bool
	// Applied lists the overrides that have a rule for the cluster, as the
	// placement's status shows them (upstream's applicable override snapshots).
	Applied *events.ClusterOverrides
	// Err says which override failed on which object, with the patch and
	// path; the other fields are then empty but Applied.
	Err error
}

// Apply applies the overrides (as Applicable returned them) to the manifests
// for cluster c.
func Apply(manifests []json.RawMessage, overrides []Snapshot, c Cluster) Result {
	var mine []Snapshot
	for _, o := range overrides {
		if slices.ContainsFunc(o.Rules, func(r api.OverrideRule) bool { return matches(r.ClusterSelector, c) }) {
			mine = append(mine, o)
		}
	}
	if len(mine) == 0 {
		return Result{Manifests: manifests}
	}
	res := Result{Applied: applied(mine)}
	e := engine{cluster: c, byTarget: map[string][]Snapshot{}}
	for _, o := range mine {
		for _, t := range o.Targets {
			k := targetKey(o.Key.Kind, t)
			e.byTarget[k] = append(e.byTarget[k], o)
		}
	}
	out := make([]json.RawMessage, 0, len(manifests))
	for _, m := range manifests {
		patched, keep, changed, err := e.manifest(m)
		if err != nil {
			res.Err = err
			return res
		}
		res.Changed = res.Changed || changed
		if keep {
			out = append(out, patched)
		}
	}
	res.Manifests = out
	return res
}

// applied lists the overrides by kind and name, at most
// events.MaxListedOverrides of each.
func applied(os []Snapshot) *events.ClusterOverrides {
	a := &events.ClusterOverrides{}
	for _, o := range os {
		switch o.Key.Kind {
		case api.ClusterResourceOverrideKind:
			if len(a.ClusterResourceOverrides) < events.MaxListedOverrides {
				a.ClusterResourceOverrides = append(a.ClusterResourceOverrides, o.Name())
			}
		default:
			if len(a.ResourceOverrides) < events.MaxListedOverrides {
				a.ResourceOverrides = append(a.ResourceOverrides, api.NamespacedName{Name: o.Name(), Namespace: o.Key.Namespace})
			}
		}
	}
	return a
}

// matches is upstream's cluster selection of an override rule: nil selects no
// cluster, no terms every cluster, else any term whose label selector matches.
func matches(sel *api.ClusterSelector, c Cluster) bool {
	if sel == nil {
		return false
	}
	if len(sel.ClusterSelectorTerms) == 0 {
		return true
	}
	for _, t := range sel.ClusterSelectorTerms {
		if t.LabelSelector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err == nil && s.Matches(labels.Set(c.Labels)) {
			return true
		}
	}
	return false
}

// targetKey keys what an override of kind selects: a ClusterResourceOverride
// cluster-scoped objects, a ResourceOverride namespaced ones. The version does
// not matter: both select one object, whichever version names it.
func targetKey(kind string, t api.ResourceIdentifier) string {
	scope := "cluster"
	if kind == api.ResourceOverrideKind {
		scope = "namespaced/" + t.Namespace
	}
	return scope + "/" + t.Group + "/" + t.Kind + "/" + t.Name
}

// object is one object of a placement's manifests: a manifest, or an object an
// envelope wraps, with its identity.
type object struct {
	id api.ResourceIdentifier
	// namespaced: the object lives in id.Namespace.
	namespaced bool
}

// keys are the target keys of the overrides that select the object: itself
// and, for a namespaced object, its Namespace by a ClusterResourceOverride.
func (o object) keys() []string {
	if !o.namespaced {
		return []string{targetKey(api.ClusterResourceOverrideKind, o.id)}
	}
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: o.id.Namespace}
	return []string{targetKey(api.ClusterResourceOverrideKind, ns), targetKey(api.ResourceOverrideKind, o.id)}
}

// describeObject names an object as upstream's messages do:
// `Deployment "web" in namespace "app"`.
func describeObject(id api.ResourceIdentifier) string {
	kind := id.Kind
	if kind == "" {
		kind = "Unknown"
	}
	s := fmt.Sprintf("%s %q", kind, id.Name)
	if id.Namespace != "" {
		s += fmt.Sprintf(" in namespace %q", id.Namespace)
	}
	if e := id.Envelope; e != nil {
		s += fmt.Sprintf(" (in %s %s)", e.Type, envelopeName(*e))
	}
	return s
}

func envelopeName(e api.EnvelopeIdentifier) string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}

// decode reads a JSON document keeping numbers as written.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// substitute replaces the variables of a patch value with the cluster's name
// and label values; a label the cluster does not have is an error.
func substitute(value string, c Cluster) (string, error) {
	value = strings.ReplaceAll(value, api.OverrideClusterNameVariable, c.Name)
	prefix := api.OverrideClusterLabelKeyVariablePrefix
	var b strings.Builder
	for {
		i := strings.Index(value, prefix)
		if i < 0 {
			b.WriteString(value)
			return b.String(), nil
		}
		end := strings.Index(value[i+len(prefix):], "}")
		if end < 0 {
			return "", fmt.Errorf("the variable %s... is missing its closing }", prefix)
		}
		key := value[i+len(prefix) : i+len(prefix)+end]
		v, ok := c.Labels[key]
		if !ok {
			return "", fmt.Errorf("label key %s not found on cluster %s", key, c.Name)
		}
		b.WriteString(value[:i])
		b.WriteString(v)
		value = value[i+len(prefix)+end+1:]
	}
}

// View is what a cluster's manifests depend on among the overrides: which of
// their rules select the cluster, and the values of the cluster labels their
// patches read. Clusters with the same view get the same manifests (but for
// ${MEMBER-CLUSTER-NAME}), so a cluster whose view changed (its labels did)
// needs its work again.
func View(overrides []Snapshot, c Cluster) string {
	var b strings.Builder
	read := map[string]bool{}
	for _, o := range overrides {
		for _, r := range o.Rules {
			if !matches(r.ClusterSelector, c) {
				b.WriteByte('0')
				continue
			}
			b.WriteByte('1')
			for _, p := range r.JSONPatchOverrides {
				for _, k := range labelVariables(string(p.Value.Raw)) {
					read[k] = true
				}
			}
		}
		b.WriteByte('|')
	}
	for _, k := range slices.Sorted(maps.Keys(read)) {
		v, ok := c.Labels[k]
		fmt.Fprintf(&b, "%q=%q/%t;", k, v, ok)
	}
	return b.String()
}

// labelVariables lists the label keys of the ${MEMBER-CLUSTER-LABEL-KEY-<key>}
// variables in a patch value.
func labelVariables(value string) []string {
	var keys []string
	prefix := api.OverrideClusterLabelKeyVariablePrefix
	for {
		i := strings.Index(value, prefix)
		if i < 0 {
			return keys
		}
		value = value[i+len(prefix):]
		end := strings.Index(value, "}")
		if end < 0 {
			return keys
		}
		keys = append(keys, value[:end])
		value = value[end+1:]
	}
}
