package quickstart

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

func examplesDir(t *testing.T) string {
	t.Helper()
	dir, err := FindExamplesDir(".")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// exampleFiles lists every YAML file under deploy/examples.
func exampleFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every example decodes, with no warning, and every object in it is valid, as fleetctl apply
// checks it; the hub files also convert into the events fleetctl would publish.
func TestExamplesAreValid(t *testing.T) {
	dir := examplesDir(t)
	files := exampleFiles(t, dir)
	if len(files) == 0 {
		t.Fatalf("no examples in %s", dir)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := api.DecodeAll(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(docs) == 0 {
				t.Fatal("no objects")
			}
			for _, d := range docs {
				if len(d.Warnings) > 0 {
					t.Errorf("document %d (%s %s): warnings %q", d.Index+1, kindOf(d), d.Object.GetName(), d.Warnings)
				}
				api.Default(d.Object)
				if errs := api.Validate(d.Object); len(errs) > 0 {
					t.Errorf("document %d (%s %s): %v", d.Index+1, kindOf(d), d.Object.GetName(), errs)
				}
			}
			// Files in subdirectories are for members, not for the hub.
			if filepath.Dir(rel) != "." && filepath.Dir(rel) != quickstartDir {
				return
			}
			loaded, problems := input.Load([]input.Source{{Name: rel, Data: data}})
			items, more := change.ForApply(loaded, change.Options{})
			for _, p := range append(problems, more...) {
				t.Errorf("fleetctl apply would refuse it: %s", p)
			}
			if len(items) != len(docs) {
				t.Errorf("fleetctl apply would publish %d objects of %d", len(items), len(docs))
			}
		})
	}
}

func kindOf(d api.Document) string { return d.Object.GetObjectKind().GroupVersionKind().Kind }

// Each seed scenario has its example.
func TestEverySeedHasAnExample(t *testing.T) {
	dir := examplesDir(t)
	for _, seed := range []string{"000", "001", "002", "003", "004"} {
		matches, _ := filepath.Glob(filepath.Join(dir, seed+"-*.yaml"))
		if len(matches) != 1 {
			t.Errorf("seed %s: %d example files (%v), want 1", seed, len(matches), matches)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("no README for the examples: %v", err)
	}
}

// The quick start's pre-existing workload is the hub's own copy, field for field: that is
// what lets whenToTakeOver: IfNoDiff take it over.
func TestQuickstartExistingWorkloadMatchesTheHub(t *testing.T) {
	quick := filepath.Join(examplesDir(t), quickstartDir)
	name, err := placementIn(quick)
	if err != nil {
		t.Fatal(err)
	}
	hub := map[string]*unstructured.Unstructured{}
	files, _ := filepath.Glob(filepath.Join(quick, "*.yaml"))
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			switch o := d.Object.(type) {
			case *unstructured.Unstructured:
				hub[objectName(o)] = o
			case *api.ClusterResourcePlacement:
				as := o.Spec.Strategy.ApplyStrategy
				if as == nil || as.WhenToTakeOver != api.WhenToTakeOverTypeIfNoDiff {
					t.Errorf("placement %s does not take over with IfNoDiff: %+v", name, as)
				}
			}
		}
	}
	existing, err := filepath.Glob(filepath.Join(quick, existingMember, "*.yaml"))
	if err != nil || len(existing) == 0 {
		t.Fatalf("no pre-existing workload in %s/%s (%v)", quick, existingMember, err)
	}
	var kinds []string
	for _, f := range existing {
		docs, err := decodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			u := d.Object.(*unstructured.Unstructured)
			kinds = append(kinds, u.GetKind())
			h, ok := hub[objectName(u)]
			if !ok {
				t.Errorf("%s runs on %s but is not on the hub", objectName(u), existingMember)
				continue
			}
			a, _ := json.Marshal(u.Object)
			b, _ := json.Marshal(h.Object)
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between %s and the hub:\n%s\n%s", objectName(u), existingMember, a, b)
			}
		}
	}
	if !slices.Contains(kinds, "Deployment") {
		t.Errorf("the pre-existing workload holds no Deployment (kinds %v): nothing shows a takeover without restart", kinds)
	}
}
