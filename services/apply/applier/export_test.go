package applier

import "time"

// SetScanTimes sets how long a search of the member serves first runs, how old
// it may be before one asks for a new one, and how long after that run the new
// one starts; the returned func restores them.
func SetScanTimes(reuse, refreshAfter, delay time.Duration) (restore func()) {
	r, a, d := scanReuse, scanRefreshAfter, scanRefreshDelay
	scanReuse, scanRefreshAfter, scanRefreshDelay = reuse, refreshAfter, delay
	return func() { scanReuse, scanRefreshAfter, scanRefreshDelay = r, a, d }
}
