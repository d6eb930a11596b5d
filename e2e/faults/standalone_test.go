package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/harness/kube"
)

// TestStandaloneSurvivesKillAndFreeze runs the quick-start stack, flotilla-standalone (every
// service, NATS, PostgreSQL and three local members under one process, all kept in one data
// directory), and checks what its user would meet: a kill -9 of the process while a placement
// rolls out, then a start on the same data directory, converges with nothing lost, re-created
// or dead-lettered; a PostgreSQL frozen (SIGSTOP) while a placement is applied (3 minutes in
// the full matrix) ends with it Available and nothing dead-lettered.
func TestStandaloneSurvivesKillAndFreeze(t *testing.T) {
	if testing.Short() {
		t.Skip("runs flotilla-standalone with three member clusters and injects faults")
	}
	freeze := 20 * time.Second
	if os.Getenv(EnvMatrix) == "full" {
		freeze = 3 * time.Minute
	}
	s := startStandalone(t)
	tr, err := startTracker(t.Context(), s.clients)
	if err != nil {
		t.Fatal(err)
	}
	faults := []fault{
		{name: "kill -9 flotilla-standalone, start again", scenario: newPlacement, when: midApply, inject: killStandalone},
		{name: fmt.Sprintf("standalone's PostgreSQL frozen %s", freeze), scenario: newPlacement, when: midApply, inject: freezeStandalonePostgres(freeze)},
	}
	c := &campaign{s: s, tr: tr}
	for i, f := range faults {
		t.Run(fmt.Sprintf("%02d %s during %s", i+1, f.name, f.scenario), func(t *testing.T) {
			c.run(t, 100+i+1, f)
		})
	}
	t.Log("fault table, the standalone stack:")
	for _, line := range table(c.rows) {
		t.Log("report| " + line)
	}
}

// killStandalone kills flotilla-standalone (its members and PostgreSQL die with it) and
// waits until, started again on its data directory, it has the members back.
func killStandalone(t *testing.T, s *stack, _ string) {
	s.services[standaloneName].Kill()
	s.waitForMembers(t)
}

// freezeStandalonePostgres stops (SIGSTOP) the standalone's PostgreSQL and every process of
// it for d, as a server that hangs.
func freezeStandalonePostgres(d time.Duration) func(*testing.T, *stack, string) {
	return func(t *testing.T, s *stack, _ string) {
		thaw := freezeProcessTree(t, filepath.Join(s.dir, "data", "postgres", "data"))
		time.Sleep(d)
		thaw()
	}
}

const standaloneName = "flotilla-standalone"

// startStandalone runs flotilla-standalone with three local members in a data directory of
// its own, under a supervisor that starts it again when it exits, and waits until the
// members have joined.
func startStandalone(t *testing.T) *stack {
	t.Helper()
	bins := binaries(t)
	kubeBins, err := kube.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "flotilla-faults-standalone-")
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL runs as another user when the tests run as root and must reach the data dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	s := &stack{dir: dir, natsURL: "nats://127.0.0.1:" + strconv.Itoa(port), services: map[string]*daemon{},
		workers: map[string]*daemon{}, clients: map[string]dynamic.Interface{}}
	d := &daemon{
		name: standaloneName, bin: filepath.Join(bins, "flotilla-standalone"), env: cleanEnv(),
		args: []string{"--data-dir", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:" + strconv.Itoa(port),
			"--local-members", strconv.Itoa(memberCount), "--kube-bin-dir", kubeBins},
		logPath: filepath.Join(dir, "flotilla-standalone.out"),
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	s.services[d.name] = d
	t.Cleanup(func() {
		d.Hold() // Ctrl-C: it stops its members and PostgreSQL
		s.stop(t)
	})
	for i := range memberCount {
		s.members = append(s.members, fmt.Sprintf("member-%d", i+1))
	}
	s.waitForMembers(t)
	for _, m := range s.members {
		rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "data", "members", m+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		s.clients[m] = dynamic.NewForConfigOrDie(rc)
	}
	s.connect(t)
	s.db = s.standaloneDatabase(t, d.logPath)
	t.Logf("flotilla-standalone running with %d members (data in %s)", memberCount, dir)
	return s
}

// freezeProcessTree stops (SIGSTOP) the PostgreSQL server whose data directory is dataDir,
// and every process below it, as a server that hangs; thaw resumes them.
func freezeProcessTree(t *testing.T, dataDir string) (thaw func()) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("the standalone's PostgreSQL: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	tree := append([]int{pid}, descendants(pid)...)
	for _, p := range tree {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	t.Logf("froze PostgreSQL: %d processes", len(tree))
	return func() {
		for _, p := range tree {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the parent's pid is the second
		// field after it.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		if fields := strings.Fields(string(stat[i+1:])); len(fields) >= 2 {
			if parent, err := strconv.Atoi(fields[1]); err == nil {
				children[parent] = append(children[parent], child)
			}
		}
	}
	var out []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// standaloneDatabase connects to the database the standalone says it uses ("PostgreSQL
// ready: URL" in its output: a local server that trusts loopback connections).
func (s *stack) standaloneDatabase(t *testing.T, outPath string) *pgxpool.Pool {
	t.Helper()
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	const mark = "PostgreSQL ready: "
	i := bytes.LastIndex(out, []byte(mark))
	if i < 0 {
		t.Fatalf("flotilla-standalone did not say where PostgreSQL is; its output:\n%s", out)
	}
	// The line goes on with how long the step took: "PostgreSQL ready: URL (5s)".
	line, _, _ := strings.Cut(string(out[i+len(mark):]), "\n")
	url, _, _ := strings.Cut(line, " ")
	db, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
