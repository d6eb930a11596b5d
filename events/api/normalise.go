package api

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// normalisePlacement repairs, at known field paths only, the shape slips that
// documentation examples make and users copy (the PickN example of the Fleet
// concepts page writes all three):
//
//   - preferredDuringSchedulingIgnoredDuringExecution given as one object
//     instead of a list: read as a one-element list;
//   - a preferred term's preference given as a one-element list instead of an
//     object: read as that element;
//   - label selector values (matchLabels values, matchExpressions values) and
//     property selector values given as numbers or booleans: read as strings.
//
// Everything else keeps its strict shape. Each repair returns a warning.
func normalisePlacement(root *yaml.Node) []string {
	var n normaliser
	spec := mappingValue(root, "spec")
	specPath := field.NewPath("spec")

	selectors := mappingValue(spec, "resourceSelectors")
	forEachItem(selectors, func(i int, sel *yaml.Node) {
		n.labelSelector(mappingValue(sel, "labelSelector"), specPath.Child("resourceSelectors").Index(i).Child("labelSelector"))
	})

	affinityPath := specPath.Child("policy", "affinity", "clusterAffinity")
	affinity := mappingValue(mappingValue(mappingValue(spec, "policy"), "affinity"), "clusterAffinity")

	requiredPath := affinityPath.Child("requiredDuringSchedulingIgnoredDuringExecution", "clusterSelectorTerms")
	forEachItem(mappingValue(mappingValue(affinity, "requiredDuringSchedulingIgnoredDuringExecution"), "clusterSelectorTerms"),
		func(i int, term *yaml.Node) { n.clusterSelectorTerm(term, requiredPath.Index(i)) })

	preferredPath := affinityPath.Child("preferredDuringSchedulingIgnoredDuringExecution")
	preferred := resolveAlias(mappingValue(affinity, "preferredDuringSchedulingIgnoredDuringExecution"))
	if preferred != nil && preferred.Kind == yaml.MappingNode {
		wrapInList(preferred)
		n.warn(preferredPath, "expected a list; read the single object as a one-element list")
	}
	forEachItem(preferred, func(i int, item *yaml.Node) {
		p := preferredPath.Index(i).Child("preference")
		pref := resolveAlias(mappingValue(item, "preference"))
		if pref != nil && pref.Kind == yaml.SequenceNode && len(pref.Content) == 1 && resolveAlias(pref.Content[0]).Kind == yaml.MappingNode {
			*pref = *resolveAlias(pref.Content[0])
			n.warn(p, "expected an object; read the one-element list as its only element")
		}
		n.clusterSelectorTerm(pref, p)
	})
	return n.warnings
}

type normaliser struct {
	warnings []string
}

func (n *normaliser) warn(path *field.Path, msg string) {
	n.warnings = append(n.warnings, fmt.Sprintf("%s: %s", path, msg))
}

func (n *normaliser) clusterSelectorTerm(term *yaml.Node, path *field.Path) {
	n.labelSelector(mappingValue(term, "labelSelector"), path.Child("labelSelector"))
	forEachItem(mappingValue(mappingValue(term, "propertySelector"), "matchExpressions"), func(i int, req *yaml.Node) {
		p := path.Child("propertySelector", "matchExpressions").Index(i).Child("values")
		forEachItem(mappingValue(req, "values"), func(j int, v *yaml.Node) { n.stringify(v, p.Index(j), "property values") })
	})
}

func (n *normaliser) labelSelector(sel *yaml.Node, path *field.Path) {
	labels := resolveAlias(mappingValue(sel, "matchLabels"))
	if labels != nil && labels.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(labels.Content); i += 2 {
			n.stringify(labels.Content[i+1], path.Child("matchLabels").Key(labels.Content[i].Value), "label values")
		}
	}
	forEachItem(mappingValue(sel, "matchExpressions"), func(i int, req *yaml.Node) {
		p := path.Child("matchExpressions").Index(i).Child("values")
		forEachItem(mappingValue(req, "values"), func(j int, v *yaml.Node) { n.stringify(v, p.Index(j), "label values") })
	})
}

// stringify turns a number or boolean scalar into the string it was written as.
func (n *normaliser) stringify(v *yaml.Node, path *field.Path, what string) {
	v = resolveAlias(v)
	if v == nil || v.Kind != yaml.ScalarNode {
		return
	}
	switch v.ShortTag() {
	case "!!int", "!!float", "!!bool":
		n.warn(path, fmt.Sprintf("%s are strings; read %s as %q", what, v.Value, v.Value))
		v.Tag, v.Style = "!!str", yaml.DoubleQuotedStyle
	}
}

// wrapInList turns node n into a one-element list holding what n was.
func wrapInList(n *yaml.Node) {
	inner := *n
	*n = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: inner.Line, Column: inner.Column, Content: []*yaml.Node{&inner}}
}

func forEachItem(list *yaml.Node, f func(int, *yaml.Node)) {
	list = resolveAlias(list)
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	for i, item := range list.Content {
		f(i, resolveAlias(item))
	}
}
