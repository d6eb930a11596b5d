// Package snapshot turns a placement's selected objects into the content of
// an immutable resource snapshot: the manifests in a stable order and a hash
// of them, so that a new snapshot is cut exactly when the content changes.
package snapshot

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
)

// Content is what a resource snapshot holds.
type Content struct {
	// Hash is "sha256:<hex>" of the canonical manifests in order.
	Hash string
	// Manifests are canonical JSON (keys sorted), Namespaces first, then
	// CustomResourceDefinitions, then everything else by identity.
	Manifests []json.RawMessage
	// Resources identify the manifests, in the same order. An envelope is
	// listed as itself.
	Resources []api.ResourceIdentifier
}

// Of builds the snapshot content of the selected objects. The same set of
// objects gives the same content whatever the order or formatting it came in.
func Of(objs []selection.Object) (Content, error) {
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(a, b selection.Object) int {
		return cmp.Or(cmp.Compare(rank(a.ID), rank(b.ID)), cmp.Compare(selection.Key(a.ID), selection.Key(b.ID)))
	})
	c := Content{Manifests: make([]json.RawMessage, 0, len(sorted)), Resources: make([]api.ResourceIdentifier, 0, len(sorted))}
	for _, o := range sorted {
		m, err := Canonical(o.Manifest)
		if err != nil {
			return Content{}, fmt.Errorf("snapshot %s: %w", selection.Key(o.ID), err)
		}
		c.Manifests = append(c.Manifests, m)
		c.Resources = append(c.Resources, o.ID)
	}
	c.Hash = Hash(c.Manifests)
	return c, nil
}

// rank orders kinds the way they must exist on a member: a Namespace before
// what lives in it, a CRD before its custom resources.
func rank(id api.ResourceIdentifier) int {
	switch {
	case id.Group == "" && id.Kind == "Namespace":
		return 0
	case id.Group == "apiextensions.k8s.io" && id.Kind == "CustomResourceDefinition":
		return 1
	default:
		return 2
	}
}

// Canonical re-encodes a JSON document with object keys sorted and numbers
// kept exactly as written, so equal content gives equal bytes.
func Canonical(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return out, nil
}

// Hash hashes canonical manifests in order.
func Hash(manifests []json.RawMessage) string {
	h := sha256.New()
	for _, m := range manifests {
		// Length-prefixed, so that no two lists hash alike by concatenation.
		fmt.Fprintf(h, "%d:", len(m))
		h.Write(m)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// HashWithOverrides hashes canonical manifests in order and the overrides
// that apply with them (encoded as JSON): a change of either is a new
// snapshot. Without overrides it is Hash, so that snapshots cut before
// overrides existed keep their hash.
func HashWithOverrides(manifests []json.RawMessage, overrides json.RawMessage) string {
	if len(overrides) == 0 {
		return Hash(manifests)
	}
	return Hash(append(slices.Clone(manifests), overrides))
}

// DueAt is when a placement's selection is evaluated after a change at now,
// and when its coalescing window opened. Each change pushes the evaluation
// quiet later (a debounce), so a burst gives one snapshot however long it
// lasts, but never later than maxWait after the window opened (opened is nil
// when no window is open), so a steady stream of changes still rolls out.
func DueAt(opened *time.Time, now time.Time, quiet, maxWait time.Duration) (due, openedAt time.Time) {
	openedAt = now
	if opened != nil {
		openedAt = *opened
	}
	due = now.Add(quiet)
	if limit := openedAt.Add(maxWait); due.After(limit) {
		due = limit
	}
	return due, openedAt
}

// Pruned lists the indexes, out of all of a placement's snapshot indexes,
// whose manifests are dropped so that only the newest limit keep theirs. The
// rows themselves stay for audit.
func Pruned(indexes []int64, limit int) []int64 {
	if limit < 1 {
		limit = 1
	}
	sorted := slices.Clone(indexes)
	slices.Sort(sorted)
	if len(sorted) <= limit {
		return nil
	}
	return sorted[:len(sorted)-limit]
}
