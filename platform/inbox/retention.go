package inbox

import (
	"time"

	"github.com/flotilla-dev/flotilla/platform/retention"
)

// Retention is the inbox's retention rule: rows handled longer ago than keep go. Keep it
// at least as long as the stream keeps events (bus.TopologyOptions.EventsMaxAge): an event
// still in the stream can be delivered again (after a lost acknowledgement, or to a
// consumer created anew, which replays the stream), and its row is what makes that
// delivery harmless.
func Retention(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "inbox", Column: "handled_at", Keep: keep}
}
