package postgres

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakePostmaster starts a process whose name is "postgres" (a copy of sleep), as the pid a
// killed server's lock file names.
func fakePostmaster(t *testing.T) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "postgres")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func writeLock(t *testing.T, pid int) (dataDir, lock string) {
	t.Helper()
	dataDir = t.TempDir()
	lock = filepath.Join(dataDir, "postmaster.pid")
	if err := os.WriteFile(lock, []byte(strconv.Itoa(pid)+"\n/data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dataDir, lock
}

func lockExists(lock string) bool {
	_, err := os.Stat(lock)
	return err == nil
}

// A killed server nobody reaped is a zombie still named postgres: PostgreSQL takes it for a
// live server and refuses to start, so the lock must go.
func TestClearStaleLockRemovesAZombieServersLock(t *testing.T) {
	cmd := fakePostmaster(t)
	cmd.Process.Signal(os.Kill) // not waited for: a zombie until the cleanup reaps it
	deadline := time.Now().Add(5 * time.Second)
	for {
		if state, _ := processState(cmd.Process.Pid); state == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed process never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	dataDir, lock := writeLock(t, cmd.Process.Pid)
	clearStaleLock(t.Context(), dataDir, time.Second, io.Discard)
	if lockExists(lock) {
		t.Error("the zombie server's lock was kept: PostgreSQL would refuse to start")
	}
}

// A server still exiting (its parent was killed a moment ago) is waited for, and its lock left
// for PostgreSQL, which removes a lock whose process is gone.
func TestClearStaleLockWaitsForAServerStillExiting(t *testing.T) {
	cmd := fakePostmaster(t)
	dataDir, _ := writeLock(t, cmd.Process.Pid)
	killed := make(chan struct{})
	go func() {
		time.Sleep(300 * time.Millisecond)
		cmd.Process.Kill() // reaped by fakePostmaster's cleanup: one Wait only
		close(killed)
	}()
	clearStaleLock(t.Context(), dataDir, 10*time.Second, io.Discard)
	select {
	case <-killed:
	default:
		t.Fatal("returned while the previous server was still running")
	}
	// Killed and not yet reaped, it is a zombie, which counts as gone.
	if state, _ := processState(cmd.Process.Pid); state != 0 && state != 'Z' {
		t.Errorf("the previous server is still there (state %c)", state)
	}
}

// A server that really runs is not touched: its lock stays, and clearStaleLock gives up after
// its grace.
func TestClearStaleLockLeavesALiveServer(t *testing.T) {
	cmd := fakePostmaster(t)
	dataDir, lock := writeLock(t, cmd.Process.Pid)
	clearStaleLock(t.Context(), dataDir, 200*time.Millisecond, io.Discard)
	if !lockExists(lock) {
		t.Error("a live server's lock was removed")
	}
}

func TestProcessStateReadsNamesWithParentheses(t *testing.T) {
	if state, comm := processState(os.Getpid()); state == 0 || comm == "" {
		t.Fatalf("own process: state %q comm %q", state, comm)
	}
	if state, _ := processState(1 << 30); state != 0 {
		t.Errorf("a pid that cannot exist has state %c", state)
	}
}
