package proc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestScratchDirSweepsOnlyDirsOfDeadOwners(t *testing.T) {
	base := t.TempDir()

	// A pid that is certainly gone: a process we started and waited for.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(base, "x-dead")
	live := filepath.Join(base, "x-live")
	foreign := filepath.Join(base, "x-foreign")
	for dir, pid := range map[string]int{dead: cmd.Process.Pid, live: os.Getppid()} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(foreign, 0o755); err != nil {
		t.Fatal(err)
	}

	dir, err := ScratchDir(base, "x-")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{dead: false, live: true, foreign: true, dir: true} {
		_, err := os.Stat(path)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(path), got, want)
		}
	}
}

func TestTailKeepsTheLastLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Tail(p, 2); got != "c\nd" {
		t.Fatalf("Tail = %q", got)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice in %v", p, ports)
		}
		seen[p] = true
	}
}

func TestPreferPortsKeepsFreePreferredPorts(t *testing.T) {
	free, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port

	ports, err := PreferPorts([]int{free[0], busy, 0})
	if err != nil {
		t.Fatal(err)
	}
	if ports[0] != free[0] {
		t.Errorf("a free preferred port was not kept: got %d, want %d", ports[0], free[0])
	}
	if ports[1] == busy || ports[1] == 0 {
		t.Errorf("a port in use was handed out: %d", ports[1])
	}
	if ports[2] == 0 || ports[2] == ports[0] || ports[2] == ports[1] {
		t.Errorf("ports are not distinct and set: %v", ports)
	}
}
