package benchkit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTemporaryDataDirGoesAwayShowingTheLogOnFailure removes a temporary dir at the end,
// after showing the tail of its log when the run failed.
func TestTemporaryDataDirGoesAwayShowingTheLogOnFailure(t *testing.T) {
	var progress bytes.Buffer
	dir, cleanUp, err := DataDir("", "benchkit-test-", false, &progress)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Repeat("early\n", 50) + "the last line\n"
	if err := os.WriteFile(filepath.Join(dir, LogFile), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	cleanUp(errors.New("failed"))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data dir is still there (%v)", err)
	}
	got := progress.String()
	if !strings.Contains(got, "the last line") || strings.Count(got, "early") != tailLines-1 {
		t.Errorf("progress = %q, want the log's last %d lines", got, tailLines)
	}
}

// TestGivenOrKeptDataDirStays keeps a dir given and a temporary one asked to be kept.
func TestGivenOrKeptDataDirStays(t *testing.T) {
	given := filepath.Join(t.TempDir(), "data")
	var progress bytes.Buffer
	dir, cleanUp, err := DataDir(given, "benchkit-test-", false, &progress)
	if err != nil || dir != given {
		t.Fatalf("DataDir(%s) = %s, %v", given, dir, err)
	}
	cleanUp(errors.New("failed"))
	if _, err := os.Stat(given); err != nil {
		t.Errorf("the data dir given: %v", err)
	}

	dir, cleanUp, err = DataDir("", "benchkit-test-", true, &progress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cleanUp(nil)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the kept data dir: %v", err)
	}
	if !strings.Contains(progress.String(), "data dir (kept): "+dir) {
		t.Errorf("progress = %q, want the kept dir named", progress.String())
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]string{1: "c", 2: "b\nc", 5: "a\nb\nc"} {
		if got := Tail(path, n); got != want {
			t.Errorf("Tail(%d) = %q, want %q", n, got, want)
		}
	}
	if got := Tail(filepath.Join(t.TempDir(), "none"), 3); !strings.Contains(got, "no such file") {
		t.Errorf("Tail of a missing file = %q, want why", got)
	}
}
