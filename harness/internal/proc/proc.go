// Package proc holds what the harness needs to run real servers as child processes: free
// ports, process attributes that make children die with the test binary, scratch directories
// that are swept when a previous run could not remove them, and log tails for error messages.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process can take
// it before the caller binds it; callers that can tell (a bind error in the log) retry.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago, holding
// each until all are chosen so that none is handed out twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// PreferPorts returns one TCP port on 127.0.0.1 per entry of preferred: the preferred port when
// it is set (> 0) and free, otherwise one that was free a moment ago. Persistent servers use it
// to come back at the address they had, so that clients' configurations stay valid.
func PreferPorts(preferred []int) ([]int, error) {
	ports := make([]int, 0, len(preferred))
	for _, want := range preferred {
		var l net.Listener
		var err error
		if want > 0 && !slices.Contains(ports, want) {
			l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", want))
		}
		if l == nil || err != nil {
			if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				return nil, fmt.Errorf("find a free port: %w", err)
			}
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ownerFile names the file in a scratch directory that records the pid of the process that
// created it, so a later run can remove directories whose owner is gone.
const ownerFile = ".flotilla-owner-pid"

// ScratchDir creates a directory under base named prefix+random and records the current pid in
// it. Before creating it, it removes directories with the same prefix whose recorded owner is no
// longer running: they are left behind by test binaries that were killed.
func ScratchDir(base, prefix string) (string, error) {
	SweepStale(base, prefix)
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", fmt.Errorf("create scratch dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("create scratch dir: %w", err)
	}
	return dir, nil
}

// SweepStale removes directories under base named prefix* whose owner process has exited.
// Directories without an owner file are left alone: they are not ours.
func SweepStale(base, prefix string) {
	matches, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
	for _, dir := range matches {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Tail returns the last n lines of the file at path, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Command prepares name with args to run in its own process group, killed by the kernel if
// the test binary dies (on Linux), with stdout and stderr appended to the file at logPath.
// The caller closes the returned log file after the process has exited.
func Command(name string, args []string, logPath string) (*exec.Cmd, *os.File, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open log for %s: %w", filepath.Base(name), err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	return cmd, logf, nil
}

// Stop ends cmd's process group: sig first, then SIGKILL if it has not exited within grace.
// done must be closed when cmd.Wait has returned.
func Stop(cmd *exec.Cmd, done <-chan struct{}, sig syscall.Signal, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	signalGroup(cmd.Process.Pid, sig)
	select {
	case <-done:
		// The leader has exited; make sure nothing else in its group survives it.
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		return
	case <-time.After(grace):
	}
	signalGroup(cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// SignalTree sends sig to cmd's process group and to every descendant of cmd's process,
// also those that left the group (PostgreSQL's backends call setsid): SIGSTOP and SIGCONT
// freeze and thaw a server whole.
func SignalTree(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	signalGroup(cmd.Process.Pid, sig)
	for _, pid := range descendants(cmd.Process.Pid) {
		_ = syscall.Kill(pid, sig)
	}
}
