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

// applyLog records when each server-side apply to the member started and
// ended, by "resource/name", and holds the apply of one object for a while.
type applyLog struct {
	next http.RoundTripper
	hold string
	wait time.Duration

	mu          sync.Mutex
	start, done map[string]time.Time
}

func (l *applyLog) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPatch || strings.Contains(req.URL.RawQuery, "dryRun") {
		return l.next.RoundTrip(req)
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	key := strings.Join(parts[len(parts)-2:], "/") // resource/name
	l.mu.Lock()
	l.start[key] = time.Now()
	l.mu.Unlock()
	if key == l.hold {
		time.Sleep(l.wait)
	}
	resp, err := l.next.RoundTrip(req)
	l.mu.Lock()
	l.done[key] = time.Now()
	l.mu.Unlock()
	return resp, err
}

// TestAppliesEachObjectAfterWhatItNeeds: an object is applied after the
// objects it needs (its namespace, the role its binding names, the account,
// configuration and bindings its pods use) and not after unrelated objects
// of earlier waves: a Deployment does not wait for a ConfigMap it does not
// use, however slow that one is.
func TestAppliesEachObjectAfterWhatItNeeds(t *testing.T) {
	ns := name(t, "app")
	log := &applyLog{hold: "configmaps/unused", wait: 3 * time.Second, start: map[string]time.Time{}, done: map[string]time.Time{}}
	cfg := members.RESTConfig(member)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { log.next = next; return log })
	a, err := applier.New(cfg, applier.Options{Cluster: member})
	if err != nil {
		t.Fatal(err)
	}
	doc := func(s string) string { return fmt.Sprintf(s, ns) }
	mustApply(t, a, ns, api.ApplyStrategy{},
		// The file's order is the reverse of the order needed.
		doc(`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: %s},
		  spec: {replicas: 0, selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}},
		    spec: {serviceAccountName: web, containers: [{name: web, image: nginx, envFrom: [{configMapRef: {name: env}}]}]}}}}`),
		doc(`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: web-reads, namespace: %[1]s},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader},
		  subjects: [{kind: ServiceAccount, name: web, namespace: %[1]s}]}`),
		doc(`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reader, namespace: %s},
		  rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]}`),
		doc(`{apiVersion: v1, kind: ConfigMap, metadata: {name: unused, namespace: %s}}`),
		doc(`{apiVersion: v1, kind: ConfigMap, metadata: {name: env, namespace: %s}}`),
		doc(`{apiVersion: v1, kind: ServiceAccount, metadata: {name: web, namespace: %s}}`),
		nsYAML(ns),
	)

	before := func(first, then string) {
		t.Helper()
		done, start := log.done[first], log.start[then]
		if done.IsZero() || start.IsZero() {
			t.Fatalf("no apply of %s or of %s seen: %v", first, then, log.start)
		}
		if start.Before(done) {
			t.Errorf("%s was applied before %s was done", then, first)
		}
	}
	before("namespaces/"+ns, "serviceaccounts/web")
	before("namespaces/"+ns, "roles/reader")
	before("roles/reader", "rolebindings/web-reads")
	before("serviceaccounts/web", "deployments/web")
	before("configmaps/env", "deployments/web")
	before("rolebindings/web-reads", "deployments/web")
	if !log.start["deployments/web"].Before(log.done["configmaps/unused"]) {
		t.Errorf("the Deployment waited for a ConfigMap it does not use (held for %s)", log.wait)
	}
}
