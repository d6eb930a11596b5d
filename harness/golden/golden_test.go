package golden_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/golden"
)

// recorder is a testing.TB that records errors instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	if !golden.Check(r, filepath.ToSlash(path), []byte("hello\n")) || len(r.errors) != 0 {
		t.Errorf("the same output: errors %q", r.errors)
	}
	if golden.Check(r, filepath.ToSlash(path), []byte("bye\n")) || len(r.errors) != 1 ||
		!strings.Contains(r.errors[0], "--- got\nbye\n\n--- want\nhello\n") {
		t.Errorf("another output: errors %q, want one showing both", r.errors)
	}
}

func TestCheckJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	if err := os.WriteFile(path, []byte("{\n  \"a\": 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	if !golden.CheckJSON(r, path, map[string]int{"a": 1}) || len(r.errors) != 0 {
		t.Errorf("errors %q, want none", r.errors)
	}
}

func TestUpdateWrites(t *testing.T) {
	if golden.Updating() {
		t.Skip("runs with -update already")
	}
	setUpdate(t)
	path := filepath.Join(t.TempDir(), "new", "out.txt")
	if !golden.Check(t, path, []byte("fresh\n")) {
		t.Error("Check with -update reported a difference")
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "fresh\n" {
		t.Errorf("golden file = %q, %v; want the output", got, err)
	}
}

func setUpdate(t *testing.T) {
	if err := flag.Set("update", "true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set("update", "false") })
	if !golden.Updating() {
		t.Fatal("-update is not golden's flag")
	}
}
