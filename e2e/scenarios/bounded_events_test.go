package scenarios

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLargeNamespaceReachesEveryMember places a namespace holding about 20 MB (ConfigMaps of
// about 900 KB each, each near Kubernetes' limit for a ConfigMap) with PickAll: the objects
// enter through fleetctl apply, travel to every member beside their events (claim checks),
// and the placement becomes Available, while no message on the bus comes near NATS's limit.
func TestLargeNamespaceReachesEveryMember(t *testing.T) {
	s := fleetFor(t)
	largest := s.watchLargestMessage(t)

	const configMaps, size = 22, 900 << 10
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: big-data\n")
	filler := strings.Repeat("x", size)
	for i := range configMaps {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: blob-%02d\n  namespace: big-data\ndata:\n  payload: %s%02d\n", i, filler, i)
	}
	b.WriteString(`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: big-data
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: big-data
  policy:
    placementType: PickAll
`)
	if total := b.Len(); total < 20_000_000 {
		t.Fatalf("the file is %d bytes, want at least 20 MB", total)
	}
	s.apply(t, b.String())
	s.deleteAtEnd(t, "big-data")

	crp := s.converged(t, "big-data", 1)
	if got := len(scheduledClusters(crp)); got != memberCount {
		t.Errorf("placed on %d clusters, want all %d", got, memberCount)
	}
	for _, m := range s.memberNames() {
		cms, err := s.member(m).CoreV1().ConfigMaps("big-data").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		n := 0
		for _, cm := range cms.Items {
			if strings.HasPrefix(cm.Name, "blob-") && len(cm.Data["payload"]) == size+2 {
				n++
			}
		}
		if n != configMaps {
			t.Errorf("%s holds %d of the %d ConfigMaps, whole", m, n, configMaps)
		}
	}
	if max := largest(); max > 512<<10 {
		t.Errorf("the largest message on the bus was %d bytes; claim checks should keep every message under 512 KiB", max)
	}
	t.Logf("largest message on the bus while placing 20 MB: %d bytes", largest())
}

// watchLargestMessage counts every message on the bus from now until the test ends and
// returns a function that reports the largest, headers included.
func (s *stack) watchLargestMessage(t *testing.T) func() int {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL, nats.Name("e2e-largest-message"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	largest := 0
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		n := len(m.Data)
		for k, vs := range m.Header {
			for _, v := range vs {
				n += len(k) + len(v) + 4
			}
		}
		mu.Lock()
		largest = max(largest, n)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return largest
	}
}
