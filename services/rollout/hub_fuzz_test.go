package rollout_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// Found by FuzzHubManifest (selection): the hub store accepted a manifest
// whose labels or namespace selection cannot read (here a label value that
// is a number), and then every selection reading its namespace failed, so a
// placement of the namespace never rolled out. Such a manifest is now
// dead-lettered, and the namespace places as if it had never come.
func TestHubManifestsSelectionCannotReadAreDeadLettered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	subj, _ := events.HubResourceSubject("", "ConfigMap", "app", "numbered")
	f.publish(events.TypeHubResourceUpserted, subj, events.HubResourceUpserted{
		Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"numbered","namespace":"app","labels":{"replicas":3}}}`)})
	f.hub(namespaceManifest("app"))
	f.place(crp("app", namespace("app")))
	f.schedule("app", 1, []string{"m1"}, nil)
	if w := f.waitWork("m1", "app", 0); len(w.Manifests) != 1 {
		t.Errorf("work holds %d manifests, want the namespace alone", len(w.Manifests))
	}
	poll.Until(t, patience, "dead letter", func() error {
		s, err := f.JS.Stream(t.Context(), bus.StreamDeadLetter)
		if err != nil {
			return err
		}
		info, err := s.Info(t.Context())
		if err != nil {
			return err
		}
		if info.State.Msgs != 1 {
			return fmt.Errorf("%d dead letters", info.State.Msgs)
		}
		return nil
	})
}
