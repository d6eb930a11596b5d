// Package poll waits, in tests, for what happens in the background: it checks
// a condition again and again until it holds, and fails the test with the
// condition's last complaint when it does not hold in time. It is the one
// poller of Flotilla's tests, in place of sleeps.
package poll

import (
	"testing"
	"time"
)

// Step is how long Until waits between two checks.
const Step = 20 * time.Millisecond

// Until calls check every Step until it returns nil. If check still fails
// after timeout, Until fails t with what (the state awaited) and check's last
// error. The timeout bounds a broken setup, not speed: the machines running
// the tests are often busy, so keep it generous.
func Until(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	Every(t, Step, timeout, what, check)
}

// Every is Until with step between two checks, for checks that cost
// something (running a command, calling an API server).
func Every(t testing.TB, step, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after %s: %v", what, timeout, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: the test ended while waiting: %v", what, err)
		case <-time.After(step):
		}
	}
}
