package poll_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/harness/poll"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so the poller's own failures can be checked.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	panic(r) // stands for runtime.Goexit: Fatalf does not return
}

func (r *recorder) run(f func()) (failure string) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failure = r.failed
	}()
	f()
	return ""
}

func TestUntilReturnsOnceTheCheckHolds(t *testing.T) {
	calls := 0
	poll.Until(t, time.Minute, "the third call", func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("check called %d times, want 3", calls)
	}
}

func TestUntilFailsWithTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	calls := 0
	failure := r.run(func() {
		poll.Until(r, 100*time.Millisecond, "the impossible", func() error {
			calls++
			return fmt.Errorf("still wrong after %d calls", calls)
		})
	})
	if want := fmt.Sprintf("the impossible: not so after 100ms: still wrong after %d calls", calls); failure != want {
		t.Errorf("failure = %q, want %q", failure, want)
	}
	if calls < 2 {
		t.Errorf("check called %d times in 100ms, want it checked again", calls)
	}
}

func TestEveryChecksAtLeastOnceAndWaitsItsStep(t *testing.T) {
	r := &recorder{TB: t}
	begin := time.Now()
	calls := 0
	failure := r.run(func() {
		poll.Every(r, 200*time.Millisecond, 0, "an answer", func() error {
			calls++
			return errors.New("no")
		})
	})
	if calls != 1 || !strings.HasSuffix(failure, ": no") {
		t.Errorf("%d calls, failure %q; want one call failing with its error", calls, failure)
	}
	calls = 0
	poll.Every(t, 200*time.Millisecond, time.Minute, "the second call", func() error {
		if calls++; calls < 2 {
			return errors.New("first")
		}
		return nil
	})
	if took := time.Since(begin); took < 200*time.Millisecond {
		t.Errorf("two checks took %s, want a step of 200ms between them", took)
	}
}
