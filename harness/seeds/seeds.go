// Package seeds gives tests in every module the YAML blocks of the product
// documents (the seeds), from the one copy under events/api/testdata/seeds:
// <seed>-<n>.yaml exactly as the seed shows the block, .reindented.yaml and
// .completed.yaml where the seed's block needed repair (see the tests of
// events/api). A test that needs a seed's placement reads it here instead of
// pasting it.
package seeds

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Dir is where the blocks are, relative to the repository's root.
const Dir = "events/api/testdata/seeds"

var dir = sync.OnceValues(func() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, Dir)); err == nil && fi.IsDir() {
			return filepath.Join(d, Dir), nil
		}
		if filepath.Dir(d) == d {
			return "", os.ErrNotExist
		}
	}
})

// Read returns the block name ("001-1.yaml"), found above the test's working
// directory (its package directory).
func Read(t testing.TB, name string) string {
	t.Helper()
	d, err := dir()
	if err != nil {
		t.Fatalf("no %s above the working directory: %v", Dir, err)
	}
	data, err := os.ReadFile(filepath.Join(d, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
