package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/golden"
)

// TestApplyReportsEveryProblem applies each file under testdata/invalid and
// compares what the user sees with its golden file: every problem on its own
// line with the file, the document (and List item), the field path and the
// line, and nothing published (NATS is never reached: the URL is unreachable,
// and the error is about the files).
func TestApplyReportsEveryProblem(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "invalid", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid inputs: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := fleetctl(t, "", "apply", "-f", f, "--nats", unreachable)
			if r.e == nil || !strings.HasSuffix(r.e.Error(), "nothing was published") {
				t.Fatalf("apply error = %v, want the problems reported and nothing published", r.e)
			}
			if r.out != "" {
				t.Errorf("stdout = %q, want nothing", r.out)
			}
			for _, line := range strings.Split(strings.TrimSpace(r.err), "\n") {
				if strings.HasPrefix(line, "  hint: ") {
					continue
				}
				if !strings.HasPrefix(line, f+": document ") {
					t.Errorf("problem line does not start with the file and document: %q", line)
				}
			}
			golden.Check(t, "testdata/golden/apply-invalid-"+filepath.Base(f)+".txt", []byte(r.combined()))
		})
	}
}

// TestApplyReportsProblemsOfEveryFile gives valid and invalid files, a
// directory and stdin together: the problems of every input are listed, in
// input order, and the count names the files.
func TestApplyReportsProblemsOfEveryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("manifests/a.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ok\n")
	write("manifests/b.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n")
	write("manifests/notes.txt", "not a manifest, and not read: directories give .yaml, .yml and .json files only\n")
	write("manifests/nested/c.json", `{"apiVersion": "v1", "kind": "Secret", "metadata": {}}`)
	stdin := "apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata:\n  name: m\nspec:\n  heartbeatPeriodSeconds: -1\n"

	r := fleetctl(t, stdin, "apply", "-f", filepath.Join(dir, "manifests"), "-R", "-f", "-", "-f", "testdata/invalid/json.json", "--nats", unreachable)
	want := strings.Join([]string{
		filepath.Join(dir, "manifests/b.yml") + ": document 1 (ConfigMap, line 1): metadata.name: is required",
		filepath.Join(dir, "manifests/nested/c.json") + ": document 1 (Secret, line 1): metadata.name: is required",
		"<stdin>: document 1 (MemberCluster m, line 1): spec.heartbeatPeriodSeconds: must be between 1 and 600 seconds, not -1",
		"testdata/invalid/json.json: document 1 (ClusterResourcePlacement from-json, line 1): spec.resourceSelectors: at least one resource selector is required",
		"testdata/invalid/json.json: document 1 (ClusterResourcePlacement from-json, line 1): spec.policy.numberOfClusters: required when placementType is PickN",
		"error: 5 problem(s) in 4 file(s); nothing was published",
	}, "\n") + "\n"
	if got := r.combined(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}

	// Without -R, the nested directory is not read.
	r = fleetctl(t, "", "apply", "-f", filepath.Join(dir, "manifests"), "--nats", unreachable)
	if strings.Contains(r.err, "nested") || !strings.Contains(r.err, "b.yml") {
		t.Errorf("without -R: %s", r.combined())
	}
}
