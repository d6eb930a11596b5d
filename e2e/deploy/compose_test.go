package deploy

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"golang.org/x/mod/modfile"
)

// loadCompose loads docker-compose.yaml with compose-go, the loader `docker compose` itself
// uses: schema validation, interpolation of ${VAR:-default}, YAML anchors and merge keys,
// every profile. It needs no Docker engine.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(root, "docker-compose.yaml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(nil), // the defaults in the file, whatever this machine's environment says
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("docker-compose.yaml does not load: %v", err)
	}
	return project
}

// mainPackage is the directory of a service's main package, by the rule deploy/docker/Dockerfile
// applies to its SERVICE build argument: services/S/cmd/S, or services/S when that is missing.
func mainPackage(root, service string) string {
	dir := filepath.Join(root, "services", service, "cmd", service)
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	return filepath.Join(root, "services", service)
}

// hasMainPackage reports whether dir holds a Go file of package main.
func hasMainPackage(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if regexp.MustCompile(`(?m)^package main\s*$`).Match(data) {
			return true
		}
	}
	return false
}

func TestComposeNamesEveryPartOfTheStack(t *testing.T) {
	p := loadCompose(t)
	if p.Name != "flotilla" {
		t.Errorf("project name %q, want flotilla (volume and network names derive from it)", p.Name)
	}
	for _, want := range []string{"nats", "postgres", "scheduler", "rollout", "status", "fleetctl"} {
		if _, ok := p.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	var members []string
	for name, s := range p.Services {
		if s.Build != nil && s.Build.Args["SERVICE"] != nil && *s.Build.Args["SERVICE"] == "apply" {
			members = append(members, name)
		}
	}
	if len(members) < 2 {
		t.Errorf("apply workers %v: want one per example member, at least two", members)
	}
}

func TestComposeServicesHaveBuildTargets(t *testing.T) {
	root := repoRoot(t)
	p := loadCompose(t)
	images := map[string]string{} // image -> SERVICE build argument
	for name, s := range p.Services {
		if s.Build == nil {
			if s.Image == "" {
				t.Errorf("service %s has neither an image nor a build", name)
			}
			continue
		}
		t.Run(name, func(t *testing.T) {
			dockerfile := s.Build.Dockerfile
			if !filepath.IsAbs(dockerfile) {
				dockerfile = filepath.Join(s.Build.Context, dockerfile)
			}
			if _, err := os.Stat(dockerfile); err != nil {
				t.Errorf("Dockerfile: %v", err)
			}
			if s.Build.Context != root {
				t.Errorf("build context %s, want the repository root %s (go.work)", s.Build.Context, root)
			}
			arg := s.Build.Args["SERVICE"]
			if arg == nil || *arg == "" {
				t.Fatalf("no SERVICE build argument")
			}
			if dir := mainPackage(root, *arg); !hasMainPackage(dir) {
				t.Errorf("SERVICE=%s: no main package in %s", *arg, dir)
			}
			// Services sharing an image must build it the same way, or one build would
			// overwrite the other's image.
			if s.Image == "" {
				t.Errorf("no image name: each build should be tagged so apply workers share one")
			} else if prev, ok := images[s.Image]; ok && prev != *arg {
				t.Errorf("image %s is built with SERVICE=%s and SERVICE=%s", s.Image, prev, *arg)
			}
			images[s.Image] = *arg
		})
	}
}

func TestComposeServicesAreHealthCheckedAndRestart(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if len(s.Profiles) > 0 || oneShot(s) {
			continue // run on demand, like fleetctl, or once, like migrate
		}
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable {
			t.Errorf("service %s has no healthcheck", name)
		}
		if s.Restart != types.RestartPolicyUnlessStopped && s.Restart != types.RestartPolicyAlways {
			t.Errorf("service %s restart policy %q: want unless-stopped or always", name, s.Restart)
		}
	}
	// Flotilla's own containers are distroless: their healthcheck is the probe the image ships.
	for _, name := range []string{"scheduler", "rollout", "status"} {
		hc := p.Services[name].HealthCheck
		if hc == nil || !slices.Contains(hc.Test, "/usr/local/bin/healthcheck") {
			t.Errorf("service %s healthcheck %v: want the image's /usr/local/bin/healthcheck", name, hc)
		}
	}
}

func TestComposeStartsServicesInOrder(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		if oneShot(s) {
			if dep, ok := s.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("one-shot service %s: want depends_on postgres with condition service_healthy", name)
			}
			continue
		}
		if dep, ok := s.DependsOn["nats"]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("service %s: want depends_on nats with condition service_healthy, have %+v", name, s.DependsOn)
		}
		switch *s.Build.Args["SERVICE"] {
		case "scheduler", "rollout", "status":
			if dep, ok := s.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("service %s: want depends_on postgres with condition service_healthy", name)
			}
			if s.Environment["DATABASE_URL"] == nil {
				t.Errorf("service %s has no DATABASE_URL", name)
			}
			if dep, ok := s.DependsOn["migrate"]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("service %s: want depends_on migrate with condition service_completed_successfully", name)
			}
		case "apply":
			// The control plane declares the WORK stream an apply worker consumes.
			if len(s.DependsOn) < 2 {
				t.Errorf("apply worker %s depends only on %v: want a control-plane service too", name, s.DependsOn)
			}
		}
	}
}

func TestComposeKeepsStateInVolumes(t *testing.T) {
	p := loadCompose(t)
	for service, dir := range map[string]string{
		"postgres": "/var/lib/postgresql/data",
		"nats":     flagValue(p.Services["nats"].Command, "-sd"),
	} {
		if dir == "" {
			t.Errorf("service %s: no data directory (nats needs -sd DIR)", service)
			continue
		}
		found := false
		for _, v := range p.Services[service].Volumes {
			if v.Type == types.VolumeTypeVolume && v.Target == dir {
				if _, declared := p.Volumes[v.Source]; !declared {
					t.Errorf("service %s mounts undeclared volume %s", service, v.Source)
				}
				found = true
			}
		}
		if !found {
			t.Errorf("service %s: %s is not on a named volume, so a restart loses it", service, dir)
		}
	}
	if !slices.Contains(p.Services["nats"].Command, "-js") {
		t.Errorf("nats command %v: JetStream (-js) is off", p.Services["nats"].Command)
	}
}

func TestComposeApplyWorkersMountTheirMembersKubeconfig(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if s.Build == nil || *s.Build.Args["SERVICE"] != "apply" {
			continue
		}
		member := flagValue(s.Command, "--cluster")
		kubeconfig := flagValue(s.Command, "--kubeconfig")
		if member == "" || kubeconfig == "" {
			t.Errorf("apply worker %s command %v: want --cluster NAME --kubeconfig PATH", name, s.Command)
			continue
		}
		if name != "apply-"+member {
			t.Errorf("service %s runs member %s: want it named apply-%s", name, member, member)
		}
		var mount *types.ServiceVolumeConfig
		for i, v := range s.Volumes {
			if v.Target == kubeconfig {
				mount = &s.Volumes[i]
			}
		}
		switch {
		case mount == nil:
			t.Errorf("apply worker %s: nothing mounted at %s", name, kubeconfig)
		case !mount.ReadOnly:
			t.Errorf("apply worker %s: kubeconfig mounted writable", name)
		case filepath.Base(mount.Source) != member+".kubeconfig":
			t.Errorf("apply worker %s mounts %s: want the member's own <name>.kubeconfig", name, mount.Source)
		}
	}
}

// TestComposeConfigValidates runs `docker compose config -q` where the compose plugin exists.
func TestComposeConfigValidates(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker CLI; TestComposeNamesEveryPartOfTheStack validates with compose-go")
	}
	if err := exec.CommandContext(t.Context(), docker, "compose", "version").Run(); err != nil {
		t.Skip("the docker compose plugin is not installed; TestComposeNamesEveryPartOfTheStack validates with compose-go")
	}
	cmd := exec.CommandContext(t.Context(), docker, "compose", "-f", "docker-compose.yaml", "config", "-q")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config -q: %v\n%s", err, out)
	}
}

// dockerfileInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerfileInstruction struct {
	cmd  string // upper case
	args []string
}

func parseDockerfile(t *testing.T, path string) []dockerfileInstruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []dockerfileInstruction
		line    string
		heredoc string // terminator while inside a heredoc
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := sc.Text()
		if heredoc != "" {
			if strings.TrimSpace(text) == heredoc {
				heredoc = ""
			}
			continue
		}
		trimmed := strings.TrimSpace(text)
		if line == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			line += cont + " "
			continue
		}
		line += trimmed
		fields := strings.Fields(line)
		if m := regexp.MustCompile(`<<-?'?"?(\w+)`).FindStringSubmatch(line); m != nil {
			heredoc = m[1]
		}
		out = append(out, dockerfileInstruction{cmd: strings.ToUpper(fields[0]), args: fields[1:]})
		line = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDockerfileCachesEveryWorkspaceModule(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	instructions := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	copied := map[string]bool{}
	for _, in := range instructions {
		if in.cmd != "COPY" || slices.ContainsFunc(in.args, func(a string) bool { return strings.HasPrefix(a, "--from") }) {
			continue
		}
		srcs := in.args[:len(in.args)-1]
		for _, src := range srcs {
			if strings.HasPrefix(src, "--") {
				continue
			}
			matches, _ := filepath.Glob(filepath.Join(root, src))
			if len(matches) == 0 {
				t.Errorf("COPY %s: nothing in the repository matches", src)
			}
			copied[src] = true
		}
	}
	// go.work names every module; `go mod download` fails unless each go.mod is there or the
	// module has been dropped from the image's workspace.
	dropped := droppedModules(instructions)
	for _, use := range work.Use {
		dir := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(use.Path)), "./")
		if !copied[dir+"/go.*"] && !dropped[dir] {
			t.Errorf("Dockerfile neither copies %s/go.* before downloading modules nor drops %s from the workspace", dir, dir)
		}
	}
	if !copied["go.work"] {
		t.Error("Dockerfile does not COPY go.work")
	}

	// The image that runs: distroless or scratch, as a non-root user.
	var final string
	var user string
	for _, in := range instructions {
		switch in.cmd {
		case "FROM":
			for _, a := range in.args {
				if !strings.HasPrefix(a, "--") {
					final, user = a, ""
					break
				}
			}
		case "USER":
			user = in.args[0]
		}
	}
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final image from %s: want distroless/static or scratch", final)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final image runs as %q: want a non-root user", user)
	}
}

// droppedModules are the modules the Dockerfile removes from the image's workspace
// (go work edit -dropuse=./DIR).
func droppedModules(instructions []dockerfileInstruction) map[string]bool {
	out := map[string]bool{}
	for _, in := range instructions {
		if in.cmd != "RUN" {
			continue
		}
		for _, a := range in.args {
			if dir, ok := strings.CutPrefix(a, "-dropuse="); ok {
				out[strings.TrimPrefix(filepath.ToSlash(filepath.Clean(dir)), "./")] = true
			}
		}
	}
	return out
}

// TestServicesBuildWithoutDroppedModules resolves every service's packages in the workspace the
// image builds in (go.work less the modules the Dockerfile drops): what the image leaves out
// must be what no service needs.
func TestServicesBuildWithoutDroppedModules(t *testing.T) {
	root := repoRoot(t)
	instructions := parseDockerfile(t, filepath.Join(root, "deploy/docker/Dockerfile"))
	dropped := droppedModules(instructions)

	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, use := range work.Use {
		dir := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(use.Path)), "./")
		if dropped[dir] {
			if err := work.DropUse(use.Path); err != nil {
				t.Fatal(err)
			}
		} else if err := work.AddUse(filepath.Join(root, dir), ""); err != nil {
			t.Fatal(err)
		} else if err := work.DropUse(use.Path); err != nil {
			t.Fatal(err)
		}
	}
	work.Cleanup()
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "go.work"), modfile.Format(work.Syntax), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.work.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.work.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}

	var mains []string
	for _, s := range loadCompose(t).Services {
		if s.Build != nil && s.Build.Args["SERVICE"] != nil {
			mains = append(mains, mainPackage(root, *s.Build.Args["SERVICE"]))
		}
	}
	slices.Sort(mains)
	mains = slices.Compact(mains)
	cmd := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}"}, mains...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(tmp, "go.work"), "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("services do not build without %v: %v\n%s", keys(dropped), err, out)
	}
}

// TestHealthcheckProbe builds the probe the images use for container healthchecks and runs it
// against a ready and an unready service.
func TestHealthcheckProbe(t *testing.T) {
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "healthcheck")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(root, "deploy/docker/healthcheck")
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	var unready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || unready.Load() {
			http.Error(w, "not ready: nats disconnected", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()

	probe := func(url string) (int, string) {
		out, err := exec.CommandContext(context.Background(), bin, url).CombinedOutput()
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := probe(srv.URL + "/readyz"); code != 0 {
		t.Errorf("ready service: exit %d (%s), want 0", code, out)
	}
	unready.Store(true)
	if code, out := probe(srv.URL + "/readyz"); code != 1 || !strings.Contains(out, "not ready: nats disconnected") {
		t.Errorf("unready service: exit %d (%q), want 1 with the service's reason", code, out)
	}
	srv.Close()
	if code, _ := probe(srv.URL + "/readyz"); code != 1 {
		t.Errorf("stopped service: exit %d, want 1", code)
	}
}

// oneShot reports whether a service runs once and exits (the migrate step).
func oneShot(s types.ServiceConfig) bool {
	return s.Restart == types.RestartPolicyNo && slices.Contains(s.Command, "--migrate-only")
}
