package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/harness/kube"
)

// repoRoot is the repository root: the nearest directory above the test holding go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test directory")
		}
		dir = parent
	}
}

// kubectl is the kubectl that hack/kube-bins.sh builds beside the member binaries.
func kubectl(t *testing.T) string {
	t.Helper()
	dir, err := kube.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no kubectl in %s: run `make kube-bins` (hack/kube-bins.sh builds it with the API server)", dir)
	}
	return bin
}

// run runs a command and returns its standard output, failing the test with its standard
// error when it fails.
func run(t *testing.T, stdin io.Reader, name string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, errOut.String(), out.String())
	}
	return out.String(), errOut.String()
}

// rendered is the output of `kubectl kustomize` on an overlay: the raw YAML and its objects.
type rendered struct {
	yaml    string
	objects []object
}

// object is one rendered manifest: its kind and name, and the document itself.
type object struct {
	Kind     string
	Name     string
	Document []byte // JSON
}

// render runs `kubectl kustomize dir`.
func render(t *testing.T, dir string) rendered {
	t.Helper()
	out, _ := run(t, nil, kubectl(t), "kustomize", dir)
	r := rendered{yaml: out}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("rendered overlay %s: %v", dir, err)
		}
		if doc == nil {
			continue
		}
		js, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if js, err = yaml.YAMLToJSON(js); err != nil {
			t.Fatal(err)
		}
		meta, _ := doc["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		kind, _ := doc["kind"].(string)
		r.objects = append(r.objects, object{Kind: kind, Name: name, Document: js})
	}
	return r
}

func (r rendered) of(kind string) []object {
	var out []object
	for _, o := range r.objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// generated finds the object a kustomize generator made from name (name plus a hash suffix).
func (r rendered) generated(t *testing.T, kind, name string) object {
	t.Helper()
	for _, o := range r.of(kind) {
		if o.Name == name || strings.HasPrefix(o.Name, name+"-") && len(o.Name) == len(name)+11 {
			return o
		}
	}
	t.Fatalf("rendered output has no %s %s", kind, name)
	return object{}
}

func (r rendered) deployments(t *testing.T) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, o := range r.of("Deployment") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(o.Document, &d); err != nil {
			t.Fatalf("deployment %s: %v", o.Name, err)
		}
		out = append(out, d)
	}
	return out
}

func (r rendered) configMap(t *testing.T, name string) corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(r.generated(t, "ConfigMap", name).Document, &cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func (r rendered) secret(t *testing.T, name string) corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := yaml.Unmarshal(r.generated(t, "Secret", name).Document, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// applyWorkers are the rendered apply worker Deployments by member name (their --cluster).
func (r rendered) applyWorkers(t *testing.T) map[string]appsv1.Deployment {
	t.Helper()
	out := map[string]appsv1.Deployment{}
	for _, d := range r.deployments(t) {
		if d.Labels["app.kubernetes.io/component"] != "apply-worker" {
			continue
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		member := flagValue(args, "--cluster")
		if member == "" {
			t.Fatalf("apply worker %s has no --cluster: %q", d.Name, args)
		}
		out[member] = d
	}
	return out
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// copyTree copies the directory src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}
