package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ownership marks. Flotilla records on each member object it manages which
// placements own it, so that anyone looking at the object can tell where it
// came from and a restarted worker can tell its objects from pre-existing ones.
//
// The marks are labels, never annotations: a Deployment's generation goes up
// when its annotations change (they are copied to its ReplicaSets), and
// taking over a Deployment must leave its generation alone.
const (
	// MarkPrefix is the domain of Flotilla's marks; labels and annotations
	// in it (and its subdomains) are ignored when comparing objects.
	MarkPrefix = "flotilla.dev/"

	// ManagedByLabel, with value ManagedByValue, is on every object Flotilla
	// manages; workers select their objects by it.
	ManagedByLabel = MarkPrefix + "managed-by"
	ManagedByValue = "flotilla"

	// OwnerLabelPrefix is followed by a placement's name (see OwnerLabel):
	// one label per placement that owns the object, with value OwnerValue.
	// More than one only with allowCoOwnership.
	OwnerLabelPrefix = "placement.flotilla.dev/"
	OwnerValue       = "owner"

	// ManifestHashLabel is the Hash of the manifest last applied, to tell
	// member-side drift from a new hub version.
	ManifestHashLabel = MarkPrefix + "manifest-hash"
)

// ManagedBySelector selects the objects Flotilla manages.
const ManagedBySelector = ManagedByLabel + "=" + ManagedByValue

// maxLabelName is the longest name part of a label key.
const maxLabelName = 63

// OwnerLabel is the label that marks placement as an owner. A placement name
// longer than a label name allows is shortened with a digest of the whole.
func OwnerLabel(placement string) string {
	return OwnerLabelPrefix + ownerToken(placement)
}

func ownerToken(placement string) string {
	if len(placement) <= maxLabelName {
		return placement
	}
	sum := sha256.Sum256([]byte(placement))
	head := strings.TrimRight(placement[:maxLabelName-11], "-.")
	return head + "-" + hex.EncodeToString(sum[:5])
}

// OwnedBy reports whether labels mark placement as an owner.
func OwnedBy(labels map[string]string, placement string) bool {
	return labels[ManagedByLabel] == ManagedByValue && labels[OwnerLabel(placement)] == OwnerValue
}

// OwnerTokens returns the owner label names on an object: the placements that
// own it (shortened if their names are long). None when it does not carry
// Flotilla's marks.
func OwnerTokens(labels map[string]string) []string {
	if labels[ManagedByLabel] != ManagedByValue {
		return nil
	}
	var out []string
	for k, v := range labels {
		if name, ok := strings.CutPrefix(k, OwnerLabelPrefix); ok && v == OwnerValue {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Owned reports whether the object is marked as owned by any placement.
func Owned(labels map[string]string) bool {
	return len(OwnerTokens(labels)) > 0
}

// SetMarks marks u, the object about to be applied, as managed by Flotilla
// and owned by each of owners (placement names or owner tokens), with the
// manifest's hash.
func SetMarks(u *unstructured.Unstructured, owners []string, hash string) {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = ManagedByValue
	for _, o := range owners {
		labels[OwnerLabel(o)] = OwnerValue
	}
	if hash != "" {
		labels[ManifestHashLabel] = hash
	}
	u.SetLabels(labels)
}
