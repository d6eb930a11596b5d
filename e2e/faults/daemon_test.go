package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// restartDelay is how long the supervisor waits before starting a process that exited, as
// compose's restart policy does.
const restartDelay = time.Second

// daemon is one long-running child process under a supervisor that starts it again when it
// exits, as `restart: unless-stopped` does in docker-compose.yaml. Exits the test asked for
// (Kill, Restart) are planned; any other exit is a crash, recorded with the log's tail.
type daemon struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	// readyURL, when set, is an HTTP endpoint that answers 200 when the process is ready.
	readyURL string
	// stopSignal ends the process for Restart (SIGTERM unless set).
	stopSignal syscall.Signal

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	planned bool          // the current process's exit was asked for
	held    bool          // do not start again until Resume
	stopped bool          // Stop was called: never start again
	starts  int
	crashes []string
	wake    chan struct{} // Resume wakes the supervisor
	done    chan struct{} // closed when the supervisor has returned
}

// start starts the process and its supervisor.
func (d *daemon) start() error {
	d.wake = make(chan struct{}, 1)
	d.done = make(chan struct{})
	if err := d.spawn(); err != nil {
		return err
	}
	go d.supervise()
	return nil
}

func (d *daemon) spawn() error {
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", d.name, err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(d.bin, d.args...)
	cmd.Env = d.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, and killed by the kernel if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Under the lock, so that Stop either sees this process or stops it from starting.
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errStopped
	}
	fmt.Fprintf(logf, "# %s: start %d: %s %s\n", time.Now().Format(time.RFC3339Nano), d.starts+1, d.bin, strings.Join(d.args, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", d.name, err)
	}
	exited := make(chan struct{})
	d.cmd, d.exited, d.planned = cmd, exited, false
	d.starts++
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

var errStopped = errors.New("stopped")

// supervise waits for each exit and starts the process again, until Stop.
func (d *daemon) supervise() {
	defer close(d.done)
	for {
		d.mu.Lock()
		cmd, exited := d.cmd, d.exited
		d.mu.Unlock()
		<-exited
		d.mu.Lock()
		if d.stopped {
			d.mu.Unlock()
			return
		}
		if !d.planned {
			d.crashes = append(d.crashes, fmt.Sprintf("%s exited by itself (%v); last lines of %s:\n%s",
				d.name, cmd.ProcessState, d.logPath, tail(d.logPath, 30)))
		}
		d.mu.Unlock()
		time.Sleep(restartDelay)
		for {
			d.mu.Lock()
			stopped, held := d.stopped, d.held
			d.mu.Unlock()
			if stopped {
				return
			}
			if !held {
				break
			}
			<-d.wake
		}
		for {
			err := d.spawn()
			if err == nil {
				break
			}
			if errors.Is(err, errStopped) {
				return
			}
			time.Sleep(restartDelay)
		}
	}
}

// Kill sends SIGKILL to the process (kill -9) and waits until it is gone; the supervisor
// starts it again after restartDelay.
func (d *daemon) Kill() { d.signal(syscall.SIGKILL, false) }

// Restart stops the process with its stop signal and waits until it is gone; the supervisor
// starts it again.
func (d *daemon) Restart() {
	sig := d.stopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	d.signal(sig, false)
}

// Hold stops the process with its stop signal and keeps it down until Resume.
func (d *daemon) Hold() {
	sig := d.stopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	d.signal(sig, true)
}

// Resume lets the supervisor start a held process again.
func (d *daemon) Resume() {
	d.mu.Lock()
	d.held = false
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *daemon) signal(sig syscall.Signal, hold bool) {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.planned = true
	d.held = d.held || hold
	d.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Stop ends the process and its supervisor for good.
func (d *daemon) Stop() {
	d.mu.Lock()
	d.stopped = true
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	d.Resume()
	<-d.done
}

// Crashes are the exits the test did not ask for, each with the log's tail.
func (d *daemon) Crashes() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.crashes...)
}

// Starts is how many times the process was started.
func (d *daemon) Starts() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.starts
}

// WaitReady waits until readyURL answers 200, or ctx ends.
func (d *daemon) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for {
		if last = get(ctx, client, d.readyURL); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last: %v)", d.name, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(http.MaxBytesReader(nil, resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return errors.New(strings.TrimSpace(body.String()))
	}
	return nil
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
