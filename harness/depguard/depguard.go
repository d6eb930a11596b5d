// Package depguard keeps packages from depending on what they must not: a
// test lists their dependencies with the go command and fails on a forbidden
// one. A guard that checks nothing passes, so it also fails when the listing
// does not hold the packages it was asked about.
package depguard

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A Rule forbids some packages to depend on others.
type Rule struct {
	// Packages are what `go list` is given, from the test's package
	// directory: import paths, patterns (./...) or relative paths.
	Packages []string
	// Forbidden are import paths none of the packages' non-test dependencies
	// may be, or be below: "k8s.io/client-go" forbids every package of
	// client-go.
	Forbidden []string
	// Allowed are exceptions to Forbidden, in the same form.
	Allowed []string
	// Why is what the rule keeps, said when it fails.
	Why string
}

type pkg struct {
	path, dir string
	root      bool
	imports   []string
}

// Check lists the non-test dependencies of r.Packages and fails t for each
// forbidden one, saying which listed package reaches it and through what. It
// fails, too, when the listing is empty or misses a package named in
// r.Packages (a pattern must match at least one), so the rule cannot pass
// vacuously. It skips t when there is no go command.
func (r Rule) Check(t testing.TB) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	if len(r.Packages) == 0 || len(r.Forbidden) == 0 {
		t.Fatalf("depguard: a rule needs packages and forbidden paths: %+v", r)
	}
	const format = "{{.ImportPath}}\t{{not .DepOnly}}\t{{.Dir}}\t{{with .Module}}{{.Main}}{{end}}\t{{join .Imports \" \"}}"
	args := append([]string{"list", "-deps", "-f", format}, r.Packages...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), gobin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(r.Packages, " "), err, stderr.Bytes())
	}
	pkgs := map[string]*pkg{}
	var roots []*pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 {
			t.Fatalf("go list printed %q, not path, root, dir, main module and imports", sc.Text())
		}
		p := &pkg{path: f[0], root: f[1] == "true", dir: f[2], imports: strings.Fields(f[4])}
		if f[3] == "true" {
			// go test caches a result until a file the test opened changes:
			// reading the directories of the workspace's packages makes a
			// new or edited file there (and so a new import) run it again.
			_, _ = os.ReadDir(p.dir)
		}
		pkgs[p.path] = p
		if p.root {
			roots = append(roots, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	r.checkListed(t, roots)

	// Each forbidden package the allowed ones reach directly fails the test;
	// those reached only through another forbidden one are counted with it.
	below := 0
	var entries []string
	for _, p := range sortedPaths(pkgs) {
		if !r.forbids(p) {
			continue
		}
		c := chain(pkgs, roots, p)
		if slices.ContainsFunc(c[:len(c)-1], r.forbids) {
			below++
			continue
		}
		entries = append(entries, strings.Join(c, " -> "))
	}
	for _, e := range entries {
		msg := fmt.Sprintf("%s depends on %s", strings.Join(r.Packages, " "), e)
		if r.Why != "" {
			msg += ": " + r.Why
		}
		t.Error(msg)
	}
	if below > 0 {
		t.Errorf("and on %d more forbidden packages those import", below)
	}
}

// checkListed fails t unless each of r.Packages is among the listed roots.
func (r Rule) checkListed(t testing.TB, roots []*pkg) {
	t.Helper()
	if len(roots) == 0 {
		t.Fatalf("go list -deps %s listed none of the packages; the guard would pass vacuously", strings.Join(r.Packages, " "))
	}
	for _, want := range r.Packages {
		if strings.Contains(want, "...") {
			continue // a pattern matched something: roots is not empty
		}
		found := false
		for _, p := range roots {
			if p.path == want || (isRelative(want) && sameDir(p.dir, want)) {
				found = true
			}
		}
		if !found {
			t.Fatalf("go list -deps did not list %s itself; the guard would pass vacuously", want)
		}
	}
}

func isRelative(p string) bool {
	return p == "." || p == ".." || strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../")
}

func sameDir(dir, rel string) bool {
	abs, err := filepath.Abs(rel)
	return err == nil && filepath.Clean(dir) == abs
}

func (r Rule) forbids(path string) bool {
	return under(path, r.Forbidden) && !under(path, r.Allowed)
}

// under reports whether path is one of prefixes or below one.
func under(path string, prefixes []string) bool {
	for _, p := range prefixes {
		p = strings.TrimSuffix(p, "/")
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// chain is the shortest import chain from a root to path.
func chain(pkgs map[string]*pkg, roots []*pkg, path string) []string {
	prev := map[string]string{}
	var queue []string
	for _, r := range roots {
		prev[r.path] = ""
		queue = append(queue, r.path)
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == path {
			var c []string
			for p := cur; p != ""; p = prev[p] {
				c = append([]string{p}, c...)
			}
			return c
		}
		if p := pkgs[cur]; p != nil {
			for _, imp := range p.imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return []string{path}
}

func sortedPaths(pkgs map[string]*pkg) []string {
	out := make([]string, 0, len(pkgs))
	for p := range pkgs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
