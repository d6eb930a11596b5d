// Package golden compares test output with golden files under testdata, and
// rewrites them when the tests run with -update:
//
//	go test ./services/status -update
//
// The -update flag is registered here, once for every test binary that
// imports the package.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// Check compares got with the golden file at path (relative to the test's
// package directory, slash-separated) and reports whether they are the same;
// a difference fails t. With -update it writes got to the file instead, and
// reports true.
func Check(t testing.TB, path string, got []byte) bool {
	t.Helper()
	path = filepath.FromSlash(path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return true
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
		return false
	}
	return true
}

// CheckJSON is Check for v as indented JSON with a final newline.
func CheckJSON(t testing.TB, path string, v any) bool {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return Check(t, path, append(data, '\n'))
}
