package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Envelope limits: an envelope wraps 1 to 50 manifests.
const (
	MinEnvelopeEntries = 1
	MaxEnvelopeEntries = 50
)

// ClusterResourceEnvelope wraps cluster-scoped manifests so that they are applied
// on member clusters and not on the hub. Each data entry is one manifest, keyed
// by a name such as a file name.
type ClusterResourceEnvelope struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Data map[string]runtime.RawExtension `json:"data"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// ResourceEnvelope wraps namespaced manifests, all in the envelope's namespace.
type ResourceEnvelope struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Data map[string]runtime.RawExtension `json:"data"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}
