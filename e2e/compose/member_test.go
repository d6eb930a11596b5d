package compose_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubectl runs kubectl from the host against a member cluster of the stack, as its
// administrator: the member's kubeconfig copied out of its container, the server at the
// container's address on the stack's network (asked each time: a restart may change it).
func (s *stack) kubectl(t testing.TB, member, stdin string, args ...string) (string, error) {
	t.Helper()
	id := strings.TrimSpace(s.mustCompose(t, "ps", "-q", member))
	if id == "" {
		return "", fmt.Errorf("no container for %s", member)
	}
	ip, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id).Output()
	if err != nil {
		return "", fmt.Errorf("address of %s: %w", member, err)
	}
	kubeconfig := filepath.Join(s.tmp, member+".kubeconfig")
	if out, err := exec.Command("docker", "cp", id+":/kubeconfig/kubeconfig", kubeconfig).CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubeconfig of %s: %v: %s", member, err, out)
	}
	bin, err := kubectlBin()
	if err != nil {
		return "", err
	}
	c := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--server", "https://" + strings.TrimSpace(string(ip)) + ":6443",
		// A server given on the command line drops the kubeconfig's tls-server-name.
		"--tls-server-name", "kubernetes"}, args...)...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s on %s: %v: %s", strings.Join(args, " "), member, err, errb.String())
	}
	return out.String(), nil
}

// kubectlBin is the kubectl hack/kube-bins.sh builds with the members' binaries.
func kubectlBin() (string, error) {
	dir := os.Getenv("FLOTILLA_KUBE_BIN_DIR")
	if dir == "" {
		out, err := exec.Command("bash", "../../hack/kube-bins.sh").Output()
		if err != nil {
			return "", fmt.Errorf("hack/kube-bins.sh: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	return filepath.Join(dir, "kubectl"), nil
}

func docker(t testing.TB, args ...string) {
	t.Helper()
	if out, err := dockerErr(args...); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func dockerErr(args ...string) ([]byte, error) {
	return exec.Command("docker", args...).CombinedOutput()
}
