package api

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// unsupportedFleetKind says what is wrong with a Fleet kind Flotilla does not
// read: the versions it reads the kind in, or the kinds of the group it knows.
func unsupportedFleetKind(gvk schema.GroupVersionKind, want schema.GroupVersion, line int) error {
	var supported, versions []string
	for k := range knownKinds {
		switch {
		case k.Group == gvk.Group && k.Kind == gvk.Kind:
			versions = append(versions, k.GroupVersion().String())
		case k.Group == gvk.Group:
			supported = append(supported, k.Kind)
		}
	}
	if len(versions) > 0 {
		// The preferred version first, as the message has always named it.
		slices.SortFunc(versions, func(a, b string) int {
			return cmp.Or(-cmp.Compare(boolInt(a == want.String()), boolInt(b == want.String())), cmp.Compare(a, b))
		})
		return ErrorList{{Type: ErrorTypeNotSupported, Field: "apiVersion", Line: line,
			Detail: fmt.Sprintf("%s is not supported for %s; use %s", gvk.GroupVersion(), gvk.Kind, strings.Join(versions, " or "))}}
	}
	slices.Sort(supported)
	supported = slices.Compact(supported) // kinds are known in several versions
	return ErrorList{{Type: ErrorTypeNotSupported, Field: "kind", Line: line,
		Detail: fmt.Sprintf("%s of %s is not supported by Flotilla (supported: %s)", gvk.Kind, gvk.Group, strings.Join(supported, ", "))}}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
