package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateClusterResourceOverride checks a ClusterResourceOverride by the rules
// of upstream's API and webhook: cluster-scoped, a placement of scope Cluster,
// 1-20 selectors each naming one object (no label selector, no duplicates),
// and a valid policy.
func ValidateClusterResourceOverride(o *ClusterResourceOverride) ErrorList {
	var p problems
	validateName(&p, o.Name, field.NewPath("metadata", "name"))
	validateClusterScoped(&p, ClusterResourceOverrideKind, o.Namespace)
	spec := field.NewPath("spec")
	if ref := o.Spec.Placement; ref != nil {
		validatePlacementRef(&p, ref, spec.Child("placement"))
		if ref.Scope == NamespaceScoped {
			p.add(ErrorTypeForbidden, spec.Child("placement", "scope"), "clusterResourceOverride placement reference cannot be Namespaced scope")
		}
	}
	sel := spec.Child("clusterResourceSelectors")
	validateSelectorCount(&p, len(o.Spec.ClusterResourceSelectors), sel)
	seen := map[string]int{}
	for i, s := range o.Spec.ClusterResourceSelectors {
		sp := sel.Index(i)
		requireGVK(&p, s.Version, s.Kind, sp)
		if s.LabelSelector != nil {
			p.add(ErrorTypeForbidden, sp.Child("labelSelector"), "is not supported: an override selects objects by name")
		}
		if s.Name == "" {
			p.add(ErrorTypeRequired, sp.Child("name"), "is required: an override selects objects by name")
			continue
		}
		key := targetKey(ResourceIdentifier{Group: s.Group, Kind: s.Kind, Name: s.Name})
		if j, dup := seen[key]; dup {
			p.add(ErrorTypeDuplicate, sp, "selects the same object as clusterResourceSelectors[%d]; selectors must be unique", j)
			continue
		}
		seen[key] = i
	}
	validateOverridePolicy(&p, o.Spec.Policy, spec.Child("policy"))
	return withPlaceholders(p.list, o.Placeholders)
}

// ValidateResourceOverride checks a ResourceOverride: namespaced, 1-20
// selectors each naming one object of its namespace (no duplicates), and a
// valid policy. A placement of scope Namespaced names a ResourcePlacement of
// the override's namespace.
func ValidateResourceOverride(o *ResourceOverride) ErrorList {
	var p problems
	validateName(&p, o.Name, field.NewPath("metadata", "name"))
	if o.Namespace == "" {
		p.add(ErrorTypeRequired, field.NewPath("metadata", "namespace"), "is required: a ResourceOverride is namespaced and selects objects of its namespace")
	}
	spec := field.NewPath("spec")
	if ref := o.Spec.Placement; ref != nil {
		validatePlacementRef(&p, ref, spec.Child("placement"))
	}
	sel := spec.Child("resourceSelectors")
	validateSelectorCount(&p, len(o.Spec.ResourceSelectors), sel)
	seen := map[string]int{}
	for i, s := range o.Spec.ResourceSelectors {
		sp := sel.Index(i)
		requireGVK(&p, s.Version, s.Kind, sp)
		if s.Name == "" {
			p.add(ErrorTypeRequired, sp.Child("name"), "is required: an override selects objects by name")
			continue
		}
		key := targetKey(ResourceIdentifier{Group: s.Group, Kind: s.Kind, Name: s.Name})
		if j, dup := seen[key]; dup {
			p.add(ErrorTypeDuplicate, sp, "selects the same object as resourceSelectors[%d]; selectors must be unique", j)
			continue
		}
		seen[key] = i
	}
	validateOverridePolicy(&p, o.Spec.Policy, spec.Child("policy"))
	return withPlaceholders(p.list, o.Placeholders)
}

func validatePlacementRef(p *problems, ref *PlacementRef, path *field.Path) {
	validateName(p, ref.Name, path.Child("name"))
	if ref.Scope != "" && !isEnumValue(ref.Scope) {
		p.add(ErrorTypeNotSupported, path.Child("scope"), "%q is not supported; use %s", ref.Scope, enumList[ResourceScope]())
	}
}

func validateSelectorCount(p *problems, n int, path *field.Path) {
	switch {
	case n == 0:
		p.add(ErrorTypeRequired, path, "at least one selector is required")
	case n > MaxOverrideSelectors:
		p.add(ErrorTypeTooMany, path, "at most %d selectors are allowed, not %d", MaxOverrideSelectors, n)
	}
}

func requireGVK(p *problems, version, kind string, path *field.Path) {
	if version == "" {
		p.add(ErrorTypeRequired, path.Child("version"), "is required")
	}
	if kind == "" {
		p.add(ErrorTypeRequired, path.Child("kind"), "is required")
	}
}

func validateOverridePolicy(p *problems, policy *OverridePolicy, path *field.Path) {
	if policy == nil {
		p.add(ErrorTypeRequired, path, "is required")
		return
	}
	rules := path.Child("overrideRules")
	switch n := len(policy.OverrideRules); {
	case n == 0:
		p.add(ErrorTypeRequired, rules, "at least one override rule is required")
	case n > MaxOverrideRules:
		p.add(ErrorTypeTooMany, rules, "at most %d override rules are allowed, not %d", MaxOverrideRules, n)
	}
	for i, r := range policy.OverrideRules {
		validateOverrideRule(p, r, rules.Index(i))
	}
}

func validateOverrideRule(p *problems, r OverrideRule, path *field.Path) {
	if cs := r.ClusterSelector; cs != nil {
		terms := path.Child("clusterSelector", "clusterSelectorTerms")
		if len(cs.ClusterSelectorTerms) > MaxClusterSelectorTerms {
			p.add(ErrorTypeTooMany, terms, "at most %d terms are allowed, not %d", MaxClusterSelectorTerms, len(cs.ClusterSelectorTerms))
		}
		for i, t := range cs.ClusterSelectorTerms {
			tp := terms.Index(i)
			if t.PropertySelector != nil {
				p.add(ErrorTypeForbidden, tp.Child("propertySelector"), "is not supported: an override rule selects clusters by labelSelector only")
			}
			if t.PropertySorter != nil {
				p.add(ErrorTypeForbidden, tp.Child("propertySorter"), "is not supported: an override rule selects clusters by labelSelector only")
			}
			if t.LabelSelector == nil {
				p.add(ErrorTypeRequired, tp.Child("labelSelector"), "is required: an override rule selects clusters by labelSelector")
			}
			validateLabelSelector(p, t.LabelSelector, tp.Child("labelSelector"))
		}
	}
	typ := r.OverrideType
	if typ == "" {
		typ = JSONPatchOverrideType
	}
	patches := path.Child("jsonPatchOverrides")
	switch typ {
	case DeleteOverrideType:
		if len(r.JSONPatchOverrides) > 0 {
			p.add(ErrorTypeForbidden, patches, "cannot be set when the override type is Delete")
		}
		return
	case JSONPatchOverrideType:
	default:
		p.add(ErrorTypeNotSupported, path.Child("overrideType"), "%q is not supported; use %s", r.OverrideType, enumList[OverrideType]())
		return
	}
	switch n := len(r.JSONPatchOverrides); {
	case n == 0:
		p.add(ErrorTypeRequired, patches, "at least one JSON patch is required when the override type is JSONPatch")
	case n > MaxJSONPatchOverrides:
		p.add(ErrorTypeTooMany, patches, "at most %d JSON patches are allowed, not %d", MaxJSONPatchOverrides, n)
	}
	for i, o := range r.JSONPatchOverrides {
		validateJSONPatchOverride(p, o, patches.Index(i))
	}
}

func validateJSONPatchOverride(p *problems, o JSONPatchOverride, path *field.Path) {
	if !isEnumValue(o.Operator) {
		p.add(ErrorTypeNotSupported, path.Child("op"), "%q is not supported; use %s", o.Operator, enumList[JSONPatchOverrideOperator]())
	}
	if msg := overridePathProblem(o.Path); msg != "" {
		p.add(ErrorTypeInvalid, path.Child("path"), "%q is not valid: %s", o.Path, msg)
	}
	switch {
	case o.Operator == JSONPatchOverrideOpRemove && len(o.Value.Raw) > 0:
		p.add(ErrorTypeForbidden, path.Child("value"), "must be empty: a remove operation has no value")
	case o.Operator != JSONPatchOverrideOpRemove && len(o.Value.Raw) == 0 && isEnumValue(o.Operator):
		p.add(ErrorTypeRequired, path.Child("value"), "is required for the %s operation", o.Operator)
	}
	if msg := variableProblem(string(o.Value.Raw)); msg != "" {
		p.add(ErrorTypeInvalid, path.Child("value"), "%s", msg)
	}
}

// overridePathProblem says what is wrong with a JSON patch path by upstream's
// webhook rules: a JSON pointer into the object that leaves its type, name,
// namespace and status alone (metadata only under labels and annotations).
func overridePathProblem(path string) string {
	if path == "" {
		return "path cannot be empty"
	}
	if !strings.HasPrefix(path, "/") {
		return "path must start with /"
	}
	parts := strings.Split(path, "/")[1:]
	switch parts[0] {
	case "kind", "apiVersion":
		return "cannot override typeMeta fields"
	case "metadata":
		if len(parts) == 1 {
			return "cannot override field metadata"
		}
		if parts[1] != "annotations" && parts[1] != "labels" {
			return "cannot override metadata fields except annotations and labels"
		}
	case "status":
		return "cannot override status fields"
	}
	for _, part := range parts {
		if strings.TrimSpace(part) == "" {
			return "path cannot contain empty string"
		}
	}
	return ""
}

// variableProblem checks the ${MEMBER-CLUSTER-LABEL-KEY-<key>} variables of a
// patch value: each must be closed and name a valid label key.
func variableProblem(value string) string {
	rest := value
	for {
		i := strings.Index(rest, OverrideClusterLabelKeyVariablePrefix)
		if i < 0 {
			return ""
		}
		rest = rest[i+len(OverrideClusterLabelKeyVariablePrefix):]
		end := strings.Index(rest, "}")
		if end < 0 {
			return fmt.Sprintf("the variable %s... is missing its closing }", OverrideClusterLabelKeyVariablePrefix)
		}
		key := rest[:end]
		if msgs := content.IsLabelKey(key); len(msgs) > 0 {
			return fmt.Sprintf("the variable %s%s} names %q, which is not a valid label key: %s",
				OverrideClusterLabelKeyVariablePrefix, key, key, strings.Join(msgs, "; "))
		}
		rest = rest[end+1:]
	}
}
