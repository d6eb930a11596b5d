package outbox

import (
	"time"

	"github.com/flotilla-dev/flotilla/platform/retention"
)

// Retention is the outbox's retention rule: rows published longer ago than keep go. Rows
// not published yet, and quarantined rows (kept for inspection), have no published time
// and stay.
func Retention(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "outbox", Column: "published_at", Keep: keep}
}
