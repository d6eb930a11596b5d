package manifest

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ownership marks. Flotilla records on each member object it manages which
// placements own it, so that anyone looking at the object can tell where it
// came from and a restarted worker can tell its objects from pre-existing ones.
const (
	// MarkPrefix prefixes every mark. Labels and annotations under it are
	// ignored when comparing objects.
	MarkPrefix = "flotilla.dev/"

	// ManagedByLabel, with value ManagedByValue, is on every object Flotilla
	// manages; workers select their objects by it.
	ManagedByLabel = MarkPrefix + "managed-by"
	ManagedByValue = "flotilla"

	// PlacementsAnnotation lists the placements that own the object, sorted
	// and comma-separated. More than one only with allowCoOwnership.
	PlacementsAnnotation = MarkPrefix + "placements"

	// ManifestHashAnnotation is the Hash of the manifest last applied, to
	// tell member-side drift from a new hub version.
	ManifestHashAnnotation = MarkPrefix + "manifest-hash"
)

// ManagedBySelector selects the objects Flotilla manages.
const ManagedBySelector = ManagedByLabel + "=" + ManagedByValue

// Owners returns the placements that own a member object: none when it does
// not carry Flotilla's marks.
func Owners(labels, annotations map[string]string) []string {
	if labels[ManagedByLabel] != ManagedByValue {
		return nil
	}
	return splitOwners(annotations[PlacementsAnnotation])
}

// OwnersOf is Owners for an object.
func OwnersOf(u *unstructured.Unstructured) []string {
	return Owners(u.GetLabels(), u.GetAnnotations())
}

func splitOwners(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// JoinOwners renders owners for PlacementsAnnotation.
func JoinOwners(owners []string) string {
	o := slices.Clone(owners)
	slices.Sort(o)
	return strings.Join(slices.Compact(o), ",")
}

// SetMarks puts the ownership marks for owners and the manifest hash on u,
// the object about to be applied.
func SetMarks(u *unstructured.Unstructured, owners []string, hash string) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = ManagedByValue
	u.SetLabels(labels)
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[PlacementsAnnotation] = JoinOwners(owners)
	if hash != "" {
		annotations[ManifestHashAnnotation] = hash
	}
	u.SetAnnotations(annotations)
}
