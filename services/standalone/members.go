package standalone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// regions are given to local members in turn, so that placements can spread across them.
var regions = []struct{ name, location string }{
	{"east", "eastus"}, {"west", "westus"}, {"central", "centralus"},
}

var updateDays = []string{"monday", "tuesday", "wednesday", "thursday", "friday"}

// LocalMemberLabels are the labels local member n (1-based) joins the fleet with: a region
// (east, west, central in turn), environment production, an update day, the labels the seeds'
// affinity examples select on, and the labels an Azure fleet gives its members.
func LocalMemberLabels(n int) map[string]string {
	r := regions[(n-1)%len(regions)]
	return map[string]string{
		"region":                     r.name,
		"environment":                "production",
		"updateDay":                  updateDays[(n-1)%len(updateDays)],
		"critical-allowed":           "true",
		"critical-level":             strconv.Itoa((n-1)%2 + 1),
		api.AzureLocationLabel:       r.location,
		api.AzureResourceGroupLabel:  "flotilla-quickstart",
		api.AzureSubscriptionIDLabel: "00000000-0000-0000-0000-000000000000",
	}
}

// readyTimeout bounds the wait for each member process to come up: a busy machine (a first
// make run compiles while it starts) can be slow.
const readyTimeout = 5 * time.Minute

// startMembers starts the local member clusters and reads the kubeconfig dir.
func (r *runner) startMembers(ctx context.Context) error {
	if r.cfg.LocalMembers > 0 || r.cfg.Hub {
		if err := r.startLocalMembers(ctx); err != nil {
			return err
		}
	}
	if r.cfg.KubeconfigDir != "" {
		if err := r.addKubeconfigDir(); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) startLocalMembers(ctx context.Context) error {
	binDir := r.cfg.KubeBinDir
	if binDir == "" {
		var err error
		if binDir, err = kube.BinDir(); err != nil {
			return err
		}
	}
	if kubectl := filepath.Join(binDir, "kubectl"); fileExists(kubectl) {
		r.kubectl = kubectl
	}
	names := make([]string, r.cfg.LocalMembers)
	for i := range names {
		names[i] = fmt.Sprintf("member-%d", i+1)
	}
	clusters := names
	what := fmt.Sprintf("%d member cluster(s)", len(names))
	if r.cfg.Hub {
		clusters = append([]string{hubName}, names...)
		what = fmt.Sprintf("the hub cluster and %d member cluster(s)", len(names))
	}
	kubeDir := filepath.Join(r.cfg.DataDir, "kube")
	done := r.out.step(fmt.Sprintf("Starting %s, each a kube-apiserver and kube-controller-manager on a shared etcd (data in %s)",
		what, r.rel(kubeDir)))
	env, err := kube.Start(ctx, kube.Options{DataDir: kubeDir, Members: clusters, BinDir: binDir, Log: r.out.writer(), ReadyTimeout: readyTimeout})
	if err != nil {
		done("failed")
		return err
	}
	r.kube = env
	if r.cfg.Hub {
		if err := copyFile(env.Kubeconfig(hubName), r.hubKubeconfig()); err != nil {
			done("failed")
			return fmt.Errorf("hub: write kubeconfig: %w", err)
		}
	}
	membersDir := filepath.Join(r.cfg.DataDir, "members")
	if err := os.MkdirAll(membersDir, 0o755); err != nil {
		done("failed")
		return fmt.Errorf("members dir: %w", err)
	}
	for i, name := range names {
		kubeconfig := filepath.Join(membersDir, name+".kubeconfig")
		if err := copyFile(env.Kubeconfig(name), kubeconfig); err != nil {
			done("failed")
			return fmt.Errorf("member %s: write kubeconfig: %w", name, err)
		}
		r.members = append(r.members, Member{Name: name, Kubeconfig: kubeconfig, Local: true, Labels: LocalMemberLabels(i + 1)})
		r.workers = append(r.workers, worker.Member{Name: name, REST: env.RESTConfig(name)})
	}
	ready := fmt.Sprintf("%s ready; kubeconfigs in %s", strings.Join(names, ", "), r.rel(membersDir))
	if r.cfg.Hub {
		ready = fmt.Sprintf("hub ready, kubeconfig %s; %s", r.rel(r.hubKubeconfig()), ready)
	}
	done(ready)
	return nil
}

// addKubeconfigDir adds a member per kubeconfig file in the kubeconfig dir.
func (r *runner) addKubeconfigDir() error {
	dir := r.cfg.KubeconfigDir
	found, err := worker.Options{KubeconfigDir: dir}.Members()
	if err != nil {
		return err
	}
	for _, w := range found {
		path := kubeconfigPath(dir, w.Name)
		if i := slices.IndexFunc(r.members, func(m Member) bool { return m.Name == w.Name }); i >= 0 {
			if sameFile(r.members[i].Kubeconfig, path) {
				continue // the data dir's own members dir, given again
			}
			return fmt.Errorf("member %s is given twice: as a local member and by %s", w.Name, path)
		}
		r.members = append(r.members, Member{Name: w.Name, Kubeconfig: path})
		r.workers = append(r.workers, w)
	}
	r.out.printf("==> Members from %s: %s\n", dir, joinOr(memberNames(r.members, false), "none"))
	return nil
}

// kubeconfigPath is the file worker.Options.Members read for member in dir.
func kubeconfigPath(dir, member string) string {
	for _, ext := range []string{".kubeconfig", ".yaml", ".yml", ".conf"} {
		if p := filepath.Join(dir, member+ext); fileExists(p) {
			return p
		}
	}
	return filepath.Join(dir, member+".kubeconfig")
}

// registerMembers makes every member join the fleet, as `fleetctl apply -f` of a
// MemberCluster would, unless the fleet knows it already: a restart must not undo what the
// user changed since (labels applied with fleetctl, a member that was made to leave).
func (r *runner) registerMembers(ctx context.Context, q *queries) error {
	done := r.out.step("Registering the member clusters")
	dir := filepath.Join(r.cfg.DataDir, "memberclusters")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		done("failed")
		return fmt.Errorf("memberclusters dir: %w", err)
	}
	var files, known []string
	for _, m := range r.members {
		mc, err := q.client.Member(ctx, m.Name)
		switch {
		case err == nil && joined(mc):
			known = append(known, m.Name)
			continue
		case err == nil:
			r.out.linef("%s left the fleet earlier and is not joined again (fleetctl apply -f %s joins it)", m.Name, r.rel(filepath.Join(dir, m.Name+".yaml")))
			continue
		case !errors.Is(err, errNotFound):
			done("failed")
			return fmt.Errorf("look up member %s: %w", m.Name, err)
		}
		path := filepath.Join(dir, m.Name+".yaml")
		if !fileExists(path) {
			if err := writeMemberCluster(path, m, r.cfg.HeartbeatPeriod.Seconds(), "fleetctl apply -f "+path); err != nil {
				done("failed")
				return err
			}
		}
		files = append(files, path)
	}
	if len(known) > 0 {
		r.out.linef("already in the fleet: %s", strings.Join(known, ", "))
	}
	if len(files) > 0 {
		args := []string{"apply"}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		r.out.linef("fleetctl %s", strings.Join(relAll(r, args), " "))
		if err := r.fleetctl(ctx, args...); err != nil {
			done("failed")
			return fmt.Errorf("register members: %w", err)
		}
	}
	all := make([]string, 0, len(r.members))
	for _, m := range r.members {
		all = append(all, m.Name)
	}
	done(fmt.Sprintf("%d member(s) in the fleet (MemberCluster files in %s); starting their apply workers: %s",
		len(r.members), r.rel(dir), strings.Join(all, ", ")))
	return nil
}

// writeMemberCluster writes the MemberCluster a member joins with, for the user to edit and
// apply again with the command apply gives (fleetctl, or kubectl on the hub).
func writeMemberCluster(path string, m Member, heartbeatSeconds float64, apply string) error {
	mc := api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.ClusterGroupVersion.String(), Kind: api.MemberClusterKind},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels},
	}
	if heartbeatSeconds >= 1 {
		mc.Spec.HeartbeatPeriodSeconds = int32(heartbeatSeconds)
	}
	data, err := yaml.Marshal(mc)
	if err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	header := "# The MemberCluster " + m.Name + " joined the fleet with. Edit it and run\n" +
		"#   " + apply + "\n# to change its labels.\n"
	if err := os.WriteFile(path, append([]byte(header), stripEmpty(data)...), 0o644); err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	return nil
}

// stripEmpty drops the empty fields the typed object writes (creationTimestamp: null,
// spec: {}, status: {}), which a person would not write.
func stripEmpty(data []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		switch strings.TrimSpace(line) {
		case "creationTimestamp: null", "spec: {}", "status: {}":
			continue
		}
		out = append(out, line)
	}
	return []byte(strings.Join(out, "\n"))
}

// joined reports whether a member's Joined condition is True.
func joined(mc *api.MemberCluster) bool {
	return conditionTrue(mc.Status.Conditions, string(api.ConditionTypeMemberClusterJoined))
}

// healthy reports whether a member's Healthy condition is True.
func healthy(mc *api.MemberCluster) bool {
	return conditionTrue(mc.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy))
}

func conditionTrue(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func memberNames(ms []Member, local bool) []string {
	var out []string
	for _, m := range ms {
		if m.Local == local {
			out = append(out, m.Name)
		}
	}
	return out
}

func relAll(r *runner, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if filepath.IsAbs(a) {
			a = r.rel(a)
		}
		out[i] = a
	}
	return out
}

func joinOr(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	return strings.Join(names, ", ")
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	// Validate what is handed to the user: a kubeconfig that does not load helps nobody.
	if _, err := clientcmd.Load(data); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", from, err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
