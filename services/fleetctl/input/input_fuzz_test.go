package input

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
)

// addSeedFiles adds the files matching each pattern to the seed corpus.
func addSeedFiles(f *testing.F, patterns ...string) {
	f.Helper()
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil || len(files) == 0 {
			f.Fatalf("no seed files match %s (%v)", p, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}

// FuzzLoad reads arbitrary bytes as a file given to fleetctl apply, from
// disk and from standard input, and loads it. The file reads back as
// written; loading is deterministic; every problem names the file and its
// document, in order; and a document without problems is valid, so what
// fleetctl publishes passes the services' validation.
func FuzzLoad(f *testing.F) {
	addSeedFiles(f, "../cli/testdata/seeds/*", "../cli/testdata/invalid/*", "../kubeadmiral/testdata/*",
		"../internal/fleetctltest/*.yaml", "../../../events/api/testdata/seeds/*")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		path := filepath.Join(t.TempDir(), "input.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sources, err := Read([]string{path, Stdin}, false, bytes.NewReader(data))
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if len(sources) != 2 || !bytes.Equal(sources[0].Data, data) || !bytes.Equal(sources[1].Data, data) || sources[1].Name != "<stdin>" {
			t.Fatalf("read %d sources, not the file and stdin as written", len(sources))
		}
		sources = sources[:1]

		docs, problems := Load(sources)
		docs2, problems2 := Load(sources)
		if render(problems) != render(problems2) || len(docs) != len(docs2) {
			t.Fatalf("Load is not deterministic:\n%s\n%s", render(problems), render(problems2))
		}
		for i, p := range problems {
			if p.Source != path || !strings.HasPrefix(p.String(), fmt.Sprintf("%s: document %d", path, p.Index+1)) || p.Detail == "" {
				t.Fatalf("problem %+v does not name its file and document: %s", p, p)
			}
			if i > 0 && (p.Index < problems[i-1].Index || p.Index == problems[i-1].Index && p.Item < problems[i-1].Item) {
				t.Fatalf("problems out of order:\n%s", render(problems))
			}
		}
		good := WithoutProblems(docs, problems)
		for _, d := range good {
			if d.Source != path {
				t.Fatalf("document from %q", d.Source)
			}
			if errs := api.Validate(d.Object); len(errs) > 0 {
				t.Fatalf("%s has no problem, but does not validate: %v", d.Where(), errs)
			}
		}
		if len(good) > len(docs) {
			t.Fatalf("%d documents without problems out of %d", len(good), len(docs))
		}
	})
}

func render(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String() + "\n")
	}
	return b.String()
}
