package input

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
)

func TestReadExpandsDirectories(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"b.yaml":         "b",
		"a.json":         "a",
		"c.YML":          "c",
		"skip.txt":       "no",
		"sub/d.yaml":     "d",
		"sub/sub/e.yaml": "e",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := func(srcs []Source) []string {
		var out []string
		for _, s := range srcs {
			rel, _ := filepath.Rel(dir, s.Name)
			out = append(out, rel+"="+string(s.Data))
		}
		return out
	}
	srcs, err := Read([]string{dir}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(srcs), []string{"a.json=a", "b.yaml=b", "c.YML=c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("flat = %v, want %v", got, want)
	}
	srcs, err = Read([]string{dir}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(srcs), []string{"a.json=a", "b.yaml=b", "c.YML=c", "sub/d.yaml=d", "sub/sub/e.yaml=e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("recursive = %v, want %v", got, want)
	}
	// A file named explicitly is read whatever its extension; stdin once.
	srcs, err = Read([]string{filepath.Join(dir, "skip.txt"), "-"}, false, strings.NewReader("in"))
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 2 || string(srcs[0].Data) != "no" || srcs[1].Name != "<stdin>" || string(srcs[1].Data) != "in" {
		t.Errorf("sources = %+v", srcs)
	}
	if _, err := Read([]string{"-", "-"}, false, strings.NewReader("")); err == nil {
		t.Error("stdin twice: no error")
	}
	if _, err := Read([]string{filepath.Join(dir, "missing.yaml")}, false, nil); err == nil || !strings.HasSuffix(err.Error(), "missing.yaml: no such file or directory") {
		t.Errorf("missing file: %v", err)
	}
}

func TestProblemString(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Source: "crp.yaml", Index: 0, Item: -1, Line: 1, Kind: "ClusterResourcePlacement", Name: "web", Field: "spec.policy.numberOfClusters", FieldLine: 9, Detail: "required when placementType is PickN"},
			"crp.yaml: document 1 (ClusterResourcePlacement web, line 1): spec.policy.numberOfClusters: required when placementType is PickN (line 9)"},
		{Problem{Source: "list.yaml", Index: 2, Item: 4, Kind: "Namespace", Detail: "bad"},
			"list.yaml: document 3, items[4] (Namespace): bad"},
		{Problem{Source: "<stdin>", Index: 0, Item: -1, Detail: "yaml: line 3: mapping values are not allowed in this context", Hint: "restore the indentation"},
			"<stdin>: document 1: yaml: line 3: mapping values are not allowed in this context\n  hint: restore the indentation"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q\nwant       %q", got, tc.want)
		}
	}
}

func TestLoadDefaultsAndValidatesEveryDocument(t *testing.T) {
	src := Source{Name: "in.yaml", Data: []byte(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: ok
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: web}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: bad
spec:
  resourceSelectors: []
  policy:
    placementType: PickN
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: fine, namespace: x}
- apiVersion: v1
  kind: ConfigMap
  metadata: {namespace: x}
`)}
	docs, problems := Load([]Source{src})
	if len(docs) != 4 {
		t.Fatalf("decoded %d documents, want 4", len(docs))
	}
	crp := docs[0].Object.(*api.ClusterResourcePlacement)
	if crp.Spec.Policy == nil || crp.Spec.Policy.PlacementType != api.PickAllPlacementType || *crp.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("placement not defaulted: %+v", crp.Spec)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"in.yaml: document 2 (ClusterResourcePlacement bad, line 9): spec.resourceSelectors: at least one resource selector is required",
		"in.yaml: document 2 (ClusterResourcePlacement bad, line 9): spec.policy.numberOfClusters: required when placementType is PickN",
		"in.yaml: document 3, items[1] (ConfigMap, line 24): metadata.name: is required",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	valid := WithoutProblems(docs, problems)
	if len(valid) != 2 || valid[0].Object.GetName() != "ok" || valid[1].Object.GetName() != "fine" {
		t.Errorf("valid documents: %v", valid)
	}
}
