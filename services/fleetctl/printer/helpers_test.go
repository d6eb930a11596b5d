package printer

import "time"

// now is the clock of every printer test: fixtures were created at 11:55.
var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }
