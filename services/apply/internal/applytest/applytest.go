// Package applytest holds what the apply worker's tests share: names that
// keep tests apart on a shared member, and desired state built from YAML.
package applytest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

var (
	runIDs sync.Map // testing.TB -> int64
	runSeq atomic.Int64
)

// Name derives a DNS label from the test's name, so tests do not collide on
// a member they share. A number per test run keeps names apart when tests
// repeat (-count).
func Name(t testing.TB, suffix string) string {
	n := strings.Trim(nonName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(n) > 44 {
		n = strings.Trim(n[len(n)-44:], "-")
	}
	id, _ := runIDs.LoadOrStore(t, runSeq.Add(1))
	n += fmt.Sprintf("-%d", id)
	if suffix != "" {
		n += "-" + suffix
	}
	return n
}

// Work is the desired state of placement on cluster: the YAML manifests,
// resource index and generation 1, an unavailable period of a second.
func Work(t testing.TB, cluster, placement string, strategy api.ApplyStrategy, manifests ...string) *events.WorkDesired {
	t.Helper()
	w := &events.WorkDesired{Cluster: cluster, Placement: placement, ResourceIndex: 1, Generation: 1,
		ApplyStrategy: strategy, UnavailablePeriodSeconds: 1}
	for _, m := range manifests {
		j, err := yaml.YAMLToJSON([]byte(m))
		if err != nil {
			t.Fatalf("manifest: %v\n%s", err, m)
		}
		w.Manifests = append(w.Manifests, json.RawMessage(j))
	}
	return w
}

// Object reads a YAML manifest.
func Object(t testing.TB, manifest string) *unstructured.Unstructured {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatalf("manifest: %v\n%s", err, manifest)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatalf("manifest: %v\n%s", err, manifest)
	}
	return u
}
