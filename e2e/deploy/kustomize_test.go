package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-dev/flotilla/harness/kube"
)

const exampleOverlay = "deploy/kubernetes/overlays/example"

// TestKustomizeOverlayDryRun renders the example overlay and has a real kube-apiserver validate
// every object (server-side dry run: schema, strict fields, defaulting, admission).
func TestKustomizeOverlayDryRun(t *testing.T) {
	root := repoRoot(t)
	r := render(t, filepath.Join(root, exampleOverlay))

	env := kube.StartTWith(t, kube.Options{Members: []string{"deploy"}, NoControllerManager: true})
	kubeconfig := env.Kubeconfig("deploy")
	k := kubectl(t)

	// A dry run creates nothing, so the namespace the objects go into must exist for real.
	for _, ns := range r.of("Namespace") {
		run(t, strings.NewReader(string(ns.Document)), k, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	}
	out, stderr := run(t, strings.NewReader(r.yaml), k, "--kubeconfig", kubeconfig,
		"apply", "--dry-run=server", "--validate=strict", "-f", "-")
	t.Logf("kubectl apply --dry-run=server:\n%s", out)
	// Warnings include PodSecurity: the namespace enforces "restricted", which a Deployment
	// only warns about at admission while its pods would be refused.
	if strings.Contains(stderr, "Warning") {
		t.Errorf("the API server warned:\n%s", stderr)
	}
	for _, o := range r.objects {
		if !strings.Contains(out, "/"+o.Name+" ") {
			t.Errorf("%s %s missing from the dry run's output", o.Kind, o.Name)
		}
	}
}

// TestKustomizeOverlayRunsAtScale checks what running at scale needs of the rendered objects.
func TestKustomizeOverlayRunsAtScale(t *testing.T) {
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	pdbs := map[string]bool{}
	for _, o := range r.of("PodDisruptionBudget") {
		pdbs[o.Name] = true
	}
	for _, d := range r.deployments(t) {
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if d.Labels["app.kubernetes.io/component"] == "control-plane" {
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
				t.Errorf("%s: %v replicas, want several", d.Name, d.Spec.Replicas)
			}
			if !pdbs[d.Name] {
				t.Errorf("%s has no PodDisruptionBudget", d.Name)
			}
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil
			}) {
				t.Errorf("%s: DATABASE_URL does not come from a Secret", d.Name)
			}
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("%s: readiness probe %+v, want GET /readyz", d.Name, c.ReadinessProbe)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("%s: liveness probe %+v, want GET /healthz", d.Name, c.LivenessProbe)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no cpu/memory requests", d.Name)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: want a non-root pod with a read-only root filesystem", d.Name)
		}
	}
	var sts []string
	for _, o := range r.of("StatefulSet") {
		sts = append(sts, o.Name)
	}
	if !slices.Contains(sts, "nats") {
		t.Errorf("no NATS StatefulSet in %v", sts)
	}
	conf := r.configMap(t, "nats-config").Data["nats.conf"]
	for _, route := range []string{"nats-0.nats-headless", "nats-1.nats-headless", "nats-2.nats-headless"} {
		if !strings.Contains(conf, route) {
			t.Errorf("nats.conf has no route to %s: want a 3-node cluster", route)
		}
	}
}

// TestMemberScriptAddsAndRemovesMembers follows deploy/README.md's steps for adding a member
// (and removing one) on a copy of the example overlay, and checks the new member's worker
// renders with NATS permissions of its own. Its name has a dot, which subjects spell '_'.
func TestMemberScriptAddsAndRemovesMembers(t *testing.T) {
	root := repoRoot(t)
	tree := filepath.Join(t.TempDir(), "kubernetes")
	copyTree(t, filepath.Join(root, "deploy/kubernetes"), tree)
	overlay := filepath.Join(tree, "overlays/example")
	script := filepath.Join(tree, "member.sh")

	kubeconfig := filepath.Join(t.TempDir(), "eu.west.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n# eu.west's own\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "bash", script, "add", overlay, "eu.west", kubeconfig)

	r := render(t, overlay)
	workers := r.applyWorkers(t)
	if _, ok := workers["eu.west"]; !ok {
		t.Fatalf("no apply worker for eu.west among %v", keys(workers))
	}
	for _, m := range []string{"member-1", "member-2"} {
		if _, ok := workers[m]; !ok {
			t.Errorf("adding a member lost %s's worker", m)
		}
	}
	if got := string(r.secret(t, "flotilla-kubeconfig-eu.west").Data["kubeconfig"]); !strings.Contains(got, "eu.west's own") {
		t.Errorf("eu.west's kubeconfig Secret holds %q, not the file given", got)
	}
	perms := natsPermissions(t, r)
	checkWorkerConfined(t, perms, "eu.west", []string{"member-1", "member-2"})
	checkWorkerConfined(t, perms, "member-1", []string{"eu.west"})

	// A second add keeps the member's password.
	before := r.secret(t, "flotilla-nats-users").Data["APPLY_EU_WEST_PASSWORD"]
	run(t, nil, "bash", script, "add", overlay, "eu.west")
	after := render(t, overlay).secret(t, "flotilla-nats-users").Data["APPLY_EU_WEST_PASSWORD"]
	if len(before) == 0 || string(before) != string(after) {
		t.Errorf("password of eu.west changed on a second add (%q -> %q)", before, after)
	}

	// Removing a member: delete its folder, then sync.
	if err := os.RemoveAll(filepath.Join(overlay, "members/member-2")); err != nil {
		t.Fatal(err)
	}
	run(t, nil, "bash", script, "sync", overlay)
	r = render(t, overlay)
	if _, ok := r.applyWorkers(t)["member-2"]; ok {
		t.Error("member-2's worker still renders after removing it")
	}
	if _, ok := natsPermissions(t, r)["apply-member-2"]; ok {
		t.Error("member-2's NATS user is still configured after removing it")
	}
	if _, ok := r.secret(t, "flotilla-nats-users").Data["APPLY_MEMBER_2_PASSWORD"]; ok {
		t.Error("member-2's password is still in the Secret after removing it")
	}
}

func TestMemberScriptRejectsBadNames(t *testing.T) {
	root := repoRoot(t)
	tree := filepath.Join(t.TempDir(), "kubernetes")
	copyTree(t, filepath.Join(root, "deploy/kubernetes"), tree)
	overlay := filepath.Join(tree, "overlays/example")
	for _, name := range []string{"Member", "member_1", "-member", "member*", "a>b"} {
		cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(tree, "member.sh"), "add", overlay, name)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("add %q succeeded: %s", name, out)
		}
		if _, err := os.Stat(filepath.Join(overlay, "members", name)); err == nil {
			t.Errorf("add %q left a member folder", name)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
