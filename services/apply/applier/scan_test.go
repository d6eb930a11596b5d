package applier_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// searches counts the requests that search the member by label.
type searches struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (s *searches) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.RawQuery, "labelSelector") {
		s.n.Add(1)
	}
	return s.next.RoundTrip(req)
}

// restarted is a new Applier for the member, as after a restart, whose
// searches of the member are counted.
func restarted(t *testing.T) (*applier.Applier, *searches) {
	t.Helper()
	counted := &searches{}
	cfg := members.RESTConfig(member)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { counted.next = next; return counted })
	a, err := applier.New(cfg, applier.Options{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	return a, counted
}

// TestFirstRunsShareOneSearch: after a restart, the search of the member that
// the first run of one placement made also serves the next placement's first
// run, which still removes what that placement owned and no longer lists.
func TestFirstRunsShareOneSearch(t *testing.T) {
	placement, other := name(t, "crp"), name(t, "other")
	ns, otherNS := name(t, ""), name(t, "other-ns")
	mustApply(t, newApplier(t), placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop", "1"), configMapYAML(ns, "drop-later", "1"))

	fresh, counted := restarted(t)
	mustApply(t, fresh, other, api.ApplyStrategy{}, nsYAML(otherNS), configMapYAML(otherNS, "other", "1"))
	if counted.n.Load() == 0 {
		t.Fatal("the first run after a restart did not search the member")
	}

	counted.n.Store(0)
	mustApply(t, fresh, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop-later", "1"))
	if n := counted.n.Load(); n != 0 {
		t.Errorf("the second placement's first run searched the member again (%d lists)", n)
	}
	if !gone(t, ns, "drop") {
		t.Error("an object the placement owned before the restart and no longer lists survived its first run")
	}
	mustApply(t, fresh, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"))
	if !gone(t, ns, "drop-later") {
		t.Error("a dropped object survived")
	}
	if gone(t, ns, "keep") || gone(t, otherNS, "other") {
		t.Error("a wanted object was deleted")
	}
}

// TestSearchRenewedBeforeFirstRunsNeedIt: a first run that finds the last search
// half expired uses it and a new one starts soon after, in the background, so
// that the next first run waits for none; the renewed search still finds what a
// placement owned before the restart.
func TestSearchRenewedBeforeFirstRunsNeedIt(t *testing.T) {
	defer applier.SetScanTimes(3*time.Second, 500*time.Millisecond, 100*time.Millisecond)()
	placement, other, third := name(t, "crp"), name(t, "other"), name(t, "third")
	ns, otherNS, thirdNS := name(t, ""), name(t, "other-ns"), name(t, "third-ns")
	mustApply(t, newApplier(t), placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"), configMapYAML(ns, "drop", "1"))

	fresh, counted := restarted(t)
	mustApply(t, fresh, other, api.ApplyStrategy{}, nsYAML(otherNS), configMapYAML(otherNS, "other", "1"))
	if counted.n.Load() == 0 {
		t.Fatal("the first run after a restart did not search the member")
	}

	time.Sleep(600 * time.Millisecond) // the search is now older than half its life
	counted.n.Store(0)
	mustApply(t, fresh, third, api.ApplyStrategy{}, nsYAML(thirdNS), configMapYAML(thirdNS, "third", "1"))
	if n := counted.n.Load(); n != 0 {
		t.Errorf("a first run waited for a new search (%d lists) while the last was still valid", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for counted.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if counted.n.Load() == 0 {
		t.Fatal("no new search started after a first run used a half-expired one")
	}

	// Past the first search's life, within the renewed one's: the next first run
	// reuses the renewal, which found what the placement owned before.
	time.Sleep(2600 * time.Millisecond)
	counted.n.Store(0)
	mustApply(t, fresh, placement, api.ApplyStrategy{}, nsYAML(ns), configMapYAML(ns, "keep", "1"))
	if n := counted.n.Load(); n != 0 {
		t.Errorf("a first run searched the member (%d lists) though a renewed search was valid", n)
	}
	if !gone(t, ns, "drop") {
		t.Error("an object the placement owned before the restart and no longer lists survived its first run")
	}
	if gone(t, ns, "keep") || gone(t, otherNS, "other") || gone(t, thirdNS, "third") {
		t.Error("a wanted object was deleted")
	}
}
