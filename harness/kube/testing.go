package kube

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// StartT starts n members (member-1 ... member-n) with controller managers for a test, fails
// the test with instructions when the binaries are missing, logs each member's ready time, and
// stops everything when the test ends. The kernel kills the processes if the test binary dies
// first.
func StartT(t testing.TB, n int) *Env {
	t.Helper()
	return StartTWith(t, Options{N: n})
}

// StartTWith is StartT with options. A nil opts.Log logs through t.
func StartTWith(t testing.TB, opts Options) *Env {
	t.Helper()
	tl := &testLog{t: t}
	if opts.Log == nil {
		opts.Log = tl
	}
	begin := time.Now()
	env, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Log(err)
		}
		tl.close()
	})
	t.Logf("%d real member API servers ready in %s (%s)", len(env.Members()), time.Since(begin).Round(time.Millisecond), env.readySummary())
	return env
}

func (e *Env) readySummary() string {
	var parts []string
	for _, m := range e.Members() {
		parts = append(parts, m+" "+e.ReadyTime(m).Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

// testLog writes to t.Log until the test's cleanup, after which testing forbids it.
type testLog struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}
