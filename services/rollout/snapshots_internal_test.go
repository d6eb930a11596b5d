package rollout

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

func TestOversizedNamesTheLimitTheSizeAndTheLargestObject(t *testing.T) {
	content := snapshot.Content{
		Manifests: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`"` + strings.Repeat("x", 3<<20) + `"`)},
		Resources: []api.ResourceIdentifier{
			{Version: "v1", Kind: "Namespace", Name: "big"},
			{Version: "v1", Kind: "ConfigMap", Namespace: "big", Name: "blob"},
		},
	}
	if msg := oversized(content, 4<<20); msg != "" {
		t.Errorf("3 MiB under a 4 MiB limit: %q", msg)
	}
	msg := oversized(content, 2<<20)
	for _, want := range []string{"3.0 MiB", "limit of 2.0 MiB", "ConfigMap big/blob (3.0 MiB)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}
