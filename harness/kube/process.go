package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// get succeeds when url answers 200 OK.
func get(ctx context.Context, client *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes, and
// explains a failure with the tail of the process's log.
func (e *Env) waitReady(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before becoming ready (%v); last lines of %s:\n%s",
				what, p.err, p.logPath, proc.Tail(p.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last lines of %s:\n%s",
				what, ctx.Err(), last, p.logPath, proc.Tail(p.logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// process is one running server.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logf    *os.File
	done    chan struct{} // closed when the process has exited; err is set then
	err     error
	once    sync.Once
}

func (e *Env) run(name, bin string, args []string, logPath string) (*process, error) {
	cmd, logf, err := proc.Command(bin, args, logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("run %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logf: logf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop kills the process group at once: everything here is throwaway.
func (p *process) stop() { p.stopWith(syscall.SIGKILL, 0) }

// stopWith sends sig to the process group and kills it if it has not exited within grace.
func (p *process) stopWith(sig syscall.Signal, grace time.Duration) {
	p.once.Do(func() {
		proc.Stop(p.cmd, p.done, sig, grace)
		p.logf.Close()
	})
}

// bindFailed reports whether the process failed because its port was taken after we chose it.
func (p *process) bindFailed() bool {
	return strings.Contains(proc.Tail(p.logPath, 50), "address already in use")
}

// watch reports a process that exits while the environment is running: tests then fail in
// confusing ways, and the log tail says why.
func (e *Env) watch(p *process) {
	<-p.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped || p.stoppedOnPurpose() {
		return
	}
	fmt.Fprintf(e.log, "kube: %s exited unexpectedly (%v); last lines of %s:\n%s\n", p.name, p.err, p.logPath, proc.Tail(p.logPath, 20))
}

func (p *process) stoppedOnPurpose() bool {
	stopped := true
	p.once.Do(func() { stopped = false; p.logf.Close() })
	return stopped
}
