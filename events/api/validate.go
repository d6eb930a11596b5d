package api

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks obj and returns every problem found, each at its field path.
// It accepts objects before or after defaulting. For objects from Decode, the
// documentation placeholders ("...") it recorded are reported too, and other
// problems inside a placeholder's field are not (the placeholder explains them).
func Validate(obj Object) ErrorList {
	switch o := obj.(type) {
	case *ClusterResourcePlacement:
		return ValidatePlacement(o)
	case *MemberCluster:
		return ValidateMemberCluster(o)
	case *ClusterResourceEnvelope:
		return ValidateClusterResourceEnvelope(o)
	case *ResourceEnvelope:
		return ValidateResourceEnvelope(o)
	case *ClusterResourceOverride:
		return ValidateClusterResourceOverride(o)
	case *ResourceOverride:
		return ValidateResourceOverride(o)
	case *ClusterStagedUpdateStrategy:
		return ValidateStagedUpdateStrategy(o)
	case *ClusterStagedUpdateRun:
		return ValidateStagedUpdateRun(o)
	case *ClusterApprovalRequest:
		return ValidateApprovalRequest(o)
	case *ClusterResourcePlacementEviction:
		return ValidateEviction(o)
	case *ClusterResourcePlacementDisruptionBudget:
		return ValidateDisruptionBudget(o)
	case *PropagationPolicy:
		return ValidatePropagationPolicy(o)
	case *ClusterPropagationPolicy:
		return ValidateClusterPropagationPolicy(o)
	case *unstructured.Unstructured:
		return ValidateHubResource(o)
	case nil:
		return ErrorList{{Type: ErrorTypeRequired, Detail: "no object to validate"}}
	default:
		return ErrorList{{Type: ErrorTypeInvalid, Detail: fmt.Sprintf("cannot validate an object of type %T", obj)}}
	}
}

// ValidateUpdate checks new as Validate does, plus the rules that relate it to
// old: a placement's placementType is immutable, and its tolerations can be
// added to but not changed or removed.
func ValidateUpdate(old, new Object) ErrorList {
	errs := Validate(new)
	oldP, ok1 := old.(*ClusterResourcePlacement)
	newP, ok2 := new.(*ClusterResourcePlacement)
	if ok1 && ok2 {
		errs = append(errs, ValidatePlacementUpdate(oldP, newP)...)
	}
	if oldE, ok := old.(*ClusterResourcePlacementEviction); ok {
		if newE, ok := new.(*ClusterResourcePlacementEviction); ok {
			errs = append(errs, ValidateEvictionUpdate(oldE, newE)...)
		}
	}
	if old != nil && new != nil && old.GetObjectKind().GroupVersionKind().GroupKind() != new.GetObjectKind().GroupVersionKind().GroupKind() {
		errs = append(errs, &FieldError{Type: ErrorTypeImmutable, Field: "kind",
			Detail: fmt.Sprintf("cannot change from %s to %s", old.GetObjectKind().GroupVersionKind().Kind, new.GetObjectKind().GroupVersionKind().Kind)})
	}
	return errs
}

// problems accumulates field errors.
type problems struct {
	list ErrorList
}

func (p *problems) add(t ErrorType, path *field.Path, format string, args ...any) {
	p.list = append(p.list, &FieldError{Type: t, Field: path.String(), Detail: fmt.Sprintf(format, args...)})
}

func (p *problems) addField(errs field.ErrorList) {
	p.list = append(p.list, fromFieldErrors(errs)...)
}

// fromFieldErrors rewords apimachinery's field errors in this package's style.
func fromFieldErrors(errs field.ErrorList) ErrorList {
	var out ErrorList
	for _, e := range errs {
		fe := &FieldError{Field: e.Field}
		switch e.Type {
		case field.ErrorTypeRequired:
			fe.Type, fe.Detail = ErrorTypeRequired, "is required"
			if e.Detail != "" {
				fe.Detail += ": " + e.Detail
			}
		case field.ErrorTypeForbidden:
			fe.Type, fe.Detail = ErrorTypeForbidden, e.Detail
		case field.ErrorTypeNotSupported:
			fe.Type, fe.Detail = ErrorTypeNotSupported, fmt.Sprintf("%s is not supported: %s", quoteValue(e.BadValue), e.Detail)
		case field.ErrorTypeDuplicate:
			fe.Type, fe.Detail = ErrorTypeDuplicate, fmt.Sprintf("%s appears twice", quoteValue(e.BadValue))
		default:
			fe.Type, fe.Detail = ErrorTypeInvalid, fmt.Sprintf("%s is not valid: %s", quoteValue(e.BadValue), e.Detail)
		}
		out = append(out, fe)
	}
	return out
}

func quoteValue(v any) string {
	if v != nil && reflect.TypeOf(v).Kind() == reflect.String {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%v", v)
}

// withPlaceholders reports each placeholder and drops the other problems it
// explains: those at the placeholder's path or below it, and those about the
// list that held it (e.g. "at least one resource selector is required" once
// the "- ..." entry is gone).
func withPlaceholders(errs ErrorList, placeholders []string) ErrorList {
	if len(placeholders) == 0 {
		return errs
	}
	var out ErrorList
	for _, e := range errs {
		if !explainedByPlaceholder(e.Field, placeholders) {
			out = append(out, e)
		}
	}
	for _, p := range placeholders {
		out = append(out, &FieldError{Type: ErrorTypePlaceholder, Field: p,
			Detail: `"..." is a placeholder copied from documentation, not a value; replace it with the real content`})
	}
	return out
}

var trailingIndex = regexp.MustCompile(`^\[\d+\]$`)

func explainedByPlaceholder(f string, placeholders []string) bool {
	for _, p := range placeholders {
		if f == p || strings.HasPrefix(f, p+".") || strings.HasPrefix(f, p+"[") {
			return true
		}
		if rest, ok := strings.CutPrefix(p, f); ok && trailingIndex.MatchString(rest) {
			return true
		}
	}
	return false
}

// Metadata checks.

// maxNameLength bounds placement and member names, as upstream does: they are
// used in labels and as names of derived objects.
const maxNameLength = 63

func validateName(p *problems, name string, path *field.Path) {
	if name == "" {
		p.add(ErrorTypeRequired, path, "is required")
		return
	}
	if len(name) > maxNameLength {
		p.add(ErrorTypeInvalid, path, "must be at most %d characters, not %d", maxNameLength, len(name))
		return
	}
	if msgs := content.IsDNS1123Subdomain(name); len(msgs) > 0 {
		p.add(ErrorTypeInvalid, path, "%q is not a valid name: %s", name, strings.Join(msgs, "; "))
	}
}

func validateClusterScoped(p *problems, kind, namespace string) {
	if namespace != "" {
		p.add(ErrorTypeForbidden, field.NewPath("metadata", "namespace"), "must be empty: %s is cluster-scoped", kind)
	}
}

func validateLabelKey(p *problems, key string, path *field.Path) {
	if msgs := content.IsLabelKey(key); len(msgs) > 0 {
		p.add(ErrorTypeInvalid, path, "%q is not a valid key: %s", key, strings.Join(msgs, "; "))
	}
}

func validateLabelValue(p *problems, value string, path *field.Path) {
	if msgs := content.IsLabelValue(value); len(msgs) > 0 {
		p.add(ErrorTypeInvalid, path, "%q is not a valid value: %s", value, strings.Join(msgs, "; "))
	}
}

// MaxObjectBytes is the largest object Kubernetes stores: etcd's default request limit,
// 1.5 MiB. A larger hub object could never be placed on a member.
const MaxObjectBytes = 3 << 19

// ValidateHubResource checks a manifest destined for member clusters: it needs
// apiVersion, kind and a name, and a ConfigMap envelope must hold manifests.
func ValidateHubResource(u *unstructured.Unstructured) ErrorList {
	var p problems
	if v := u.GetAPIVersion(); v == "" {
		p.add(ErrorTypeRequired, field.NewPath("apiVersion"), "is required")
	} else if gv, err := schema.ParseGroupVersion(v); err != nil || gv.Version == "" {
		p.add(ErrorTypeInvalid, field.NewPath("apiVersion"), "%q is not a valid group/version", v)
	}
	if u.GetKind() == "" {
		p.add(ErrorTypeRequired, field.NewPath("kind"), "is required")
	}
	if u.GetName() == "" && u.GetGenerateName() == "" {
		p.add(ErrorTypeRequired, field.NewPath("metadata", "name"), "is required")
	}
	if IsEnvelopeConfigMap(u) {
		validateConfigMapEnvelope(&p, u)
	}
	return p.list
}
