package applier_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// requests counts the requests an Applier has in flight to the member (below
// its own bound), and the applies of ConfigMaps among them.
type requests struct {
	next http.RoundTripper

	mu                      sync.Mutex
	inFlight, most          int
	applies, mostApplies    int
	started                 bool
	together, waitedTooLong chan struct{}
}

func newRequests() *requests {
	return &requests{together: make(chan struct{}), waitedTooLong: make(chan struct{})}
}

func (c *requests) wrap(next http.RoundTripper) http.RoundTripper {
	c.next = next
	return c
}

// RoundTrip holds each ConfigMap apply until two are in flight at once, so
// that an applier sending one after another is caught by the counts rather
// than by how fast the member answers; it gives up waiting after a while.
func (c *requests) RoundTrip(req *http.Request) (*http.Response, error) {
	apply := req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/configmaps/") && !strings.Contains(req.URL.RawQuery, "dryRun")
	c.mu.Lock()
	c.inFlight++
	c.most = max(c.most, c.inFlight)
	if apply {
		c.applies++
		c.mostApplies = max(c.mostApplies, c.applies)
		if c.applies == 2 {
			select {
			case <-c.together:
			default:
				close(c.together)
			}
		}
		if !c.started {
			c.started = true
			time.AfterFunc(10*time.Second, func() { close(c.waitedTooLong) })
		}
	}
	c.mu.Unlock()
	if apply {
		select {
		case <-c.together:
		case <-c.waitedTooLong:
		case <-req.Context().Done():
		}
	}
	resp, err := c.next.RoundTrip(req)
	c.mu.Lock()
	c.inFlight--
	if apply {
		c.applies--
	}
	c.mu.Unlock()
	return resp, err
}

func (c *requests) maxima() (all, applies int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most, c.mostApplies
}

func configMaps30(ns string) []string {
	manifests := []string{nsYAML(ns)}
	for i := range 30 {
		manifests = append(manifests, configMapYAML(ns, fmt.Sprintf("config-%02d", i), "1"))
	}
	return manifests
}

// TestAppliesAtOnceWithinTheMemberBound applies the objects of a wave at
// once, never more requests in flight to the member than MaxInFlight, and
// one bound for all of the member's placements: 30 ConfigMaps are applied
// more than one at a time, alone and beside two other placements.
func TestAppliesAtOnceWithinTheMemberBound(t *testing.T) {
	const bound = 4
	counted := newRequests()
	cfg := members.RESTConfig(member)
	cfg.Wrap(counted.wrap)
	a, err := applier.New(cfg, applier.Options{Cluster: member, MaxInFlight: bound})
	if err != nil {
		t.Fatal(err)
	}

	mustApply(t, a, name(t, "alone"), api.ApplyStrategy{}, configMaps30(name(t, "alone"))...)
	all, applies := counted.maxima()
	t.Logf("one placement: at most %d requests and %d ConfigMap applies in flight", all, applies)
	if applies < 2 {
		t.Errorf("30 ConfigMaps were applied one at a time (at most %d in flight)", applies)
	}
	if all > bound {
		t.Errorf("%d requests were in flight to the member, above the bound of %d", all, bound)
	}

	var wg sync.WaitGroup
	for i := range 3 {
		placement := name(t, fmt.Sprintf("beside-%d", i))
		w := work(t, placement, api.ApplyStrategy{}, configMaps30(placement)...)
		wg.Go(func() {
			report, err := a.Apply(t.Context(), w)
			if err != nil || report.Applied.Status != "True" {
				t.Errorf("apply %s: %v %s", placement, err, dump(report))
			}
		})
	}
	wg.Wait()
	for i := range 3 {
		ns := name(t, fmt.Sprintf("beside-%d", i))
		for j := range 30 {
			if get(t, configMaps, ns, fmt.Sprintf("config-%02d", j)) == nil {
				t.Fatalf("ConfigMap config-%02d of placement %s is missing", j, ns)
			}
		}
	}
	if all, _ := counted.maxima(); all > bound {
		t.Errorf("%d requests were in flight to the member with three placements applied at once, above the bound of %d", all, bound)
	}
}
