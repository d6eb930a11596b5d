package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The suite runs the hub as compose does: nats-server and each hub service its own
// process, so that each one's memory is its own and a restart is a real one.
const modulePath = "github.com/flotilla-dev/flotilla/"

// hubServiceNames are the hub services the suite runs, in the order they start.
var hubServiceNames = []string{"scheduler", "rollout", "status"}

// buildBinaries builds nats-server and the hub services into dir (without the race
// detector: they are measured).
func buildBinaries(ctx context.Context, dir string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range hubServiceNames {
		args = append(args, modulePath+"services/"+name+"/cmd/"+name)
	}
	if err := goBuild(ctx, args...); err != nil {
		return err
	}
	return goBuild(ctx, "build", "-o", filepath.Join(dir, "nats-server"), "github.com/nats-io/nats-server/v2")
}

func goBuild(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// proc is one child process that the suite starts, stops and starts again. It samples
// the process's peak resident memory (VmHWM) while it runs, keeping the largest of every
// incarnation.
type proc struct {
	name     string
	bin      string
	args     []string
	logPath  string
	readyURL string
	env      []string // added to the environment, as GOMEMLIMIT=448MiB

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	peakRSS int64
	cpu     time.Duration // CPU time (user + system) of the incarnations that exited
	last    time.Duration // of the current incarnation, as last sampled
	stopped bool
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(cleanEnv(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed by the kernel if the benchmark dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	fmt.Fprintf(logf, "# %s: start: %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.stopped = cmd, exited, false
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	go p.sample(cmd.Process.Pid, exited)
	return nil
}

// sample reads the process's peak RSS every 500 ms until it exits.
func (p *proc) sample(pid int, exited <-chan struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		v, cpu := procStatusOf(pid, "VmHWM"), cpuTime(pid)
		p.mu.Lock()
		p.peakRSS = max(p.peakRSS, v)
		p.last = max(p.last, cpu)
		p.mu.Unlock()
		select {
		case <-exited:
			p.mu.Lock()
			p.cpu += p.last
			p.last = 0
			p.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// peak is the largest peak RSS of any incarnation so far.
func (p *proc) peak() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.stopped {
		p.peakRSS = max(p.peakRSS, procStatusOf(p.cmd.Process.Pid, "VmHWM"))
	}
	return p.peakRSS
}

// cpuUsed is the CPU time (user + system) of every incarnation so far.
func (p *proc) cpuUsed() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.stopped {
		p.last = max(p.last, cpuTime(p.cmd.Process.Pid))
	}
	return p.cpu + p.last
}

// exitedCh is closed when the current incarnation exits.
func (p *proc) exitedCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// stop ends the process with SIGTERM (SIGKILL after 30 s) and waits for it.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	if cmd == nil || p.stopped {
		p.mu.Unlock()
		return
	}
	p.peakRSS = max(p.peakRSS, procStatusOf(cmd.Process.Pid, "VmHWM"))
	p.last = max(p.last, cpuTime(cmd.Process.Pid))
	p.stopped = true
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// signal sends sig to the running process (SIGSTOP and SIGCONT pause and resume it).
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.stopped {
		return fmt.Errorf("%s is not running", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// waitReady polls readyURL until it answers 200.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.readyURL, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w", p.name, p.readyURL, ctx.Err())
		case <-p.exitedCh():
			return fmt.Errorf("%s exited; see %s", p.name, p.logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// procStatusOf reads a size field of /proc/<pid>/status, in bytes; 0 when unknown.
func procStatusOf(pid int, field string) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the user and system CPU time of process pid (/proc/<pid>/stat, in clock
// ticks of 1/100 s, Linux's USER_HZ); 0 when unknown.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields count from after it.
	_, rest, ok := strings.Cut(string(data), ") ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// cleanEnv is this process's environment without the settings that would point a
// service elsewhere than the suite's hub.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLOTILLA_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "KUBECONFIG=") ||
			strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// newProc is a process of bin with args and a health endpoint on a free port.
func newProc(name, bin, logDir string, args ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("a port for %s: %w", name, err)
	}
	return &proc{
		name: name, bin: bin, logPath: filepath.Join(logDir, name+".log"),
		args:     append(args, "--health-addr", "127.0.0.1:"+strconv.Itoa(port), "--log-format", "text"),
		readyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", port),
	}, nil
}
