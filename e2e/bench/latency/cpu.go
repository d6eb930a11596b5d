package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The machine's CPU goes to the members as much as to Flotilla: on two cores three API
// servers, their etcds and controllers, PostgreSQL and the stack share it. cpuUse says who
// used how much during a change, from /proc, so that a figure can be told apart as waiting
// for work or waiting for a CPU.

// Process kinds counted; anything else on the machine is "other".
var cpuKinds = []string{"flotilla (this process)", "kube-apiserver", "etcd", "kube-controller-manager", "postgres", "other"}

// cpuUse is CPU time used, by process kind.
type cpuUse map[string]time.Duration

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// sampleCPU reads the CPU time every process on the machine has used so far, keyed by
// pid, with its kind. It returns nil where /proc cannot be read (not Linux).
func sampleCPU() map[int]cpuSample {
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(dirs) == 0 {
		return nil
	}
	self := os.Getpid()
	out := make(map[int]cpuSample, len(dirs))
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ... utime is field 14, stime 15; comm may hold spaces.
		open, closing := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closing < open {
			continue
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
		if err != nil {
			continue
		}
		fields := bytes.Fields(b[closing+1:])
		if len(fields) < 13 {
			continue
		}
		utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
		stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		kind := "other"
		switch comm := string(b[open+1 : closing]); {
		case pid == self:
			kind = cpuKinds[0]
		case comm == "kube-apiserver" || comm == "etcd" || comm == "kube-controller" || comm == "postgres":
			kind = comm
			if comm == "kube-controller" { // comm is cut at 15 bytes
				kind = "kube-controller-manager"
			}
		}
		out[pid] = cpuSample{kind: kind, used: time.Duration(utime+stime) * clockTick}
	}
	return out
}

type cpuSample struct {
	kind string
	used time.Duration
}

// cpuSince is what each kind used between before and now. A process that started in
// between counts from zero; one that ended is lost (its time went to its parent's
// children counters, which nothing here reads).
func cpuSince(before map[int]cpuSample) cpuUse {
	if before == nil {
		return nil
	}
	use := cpuUse{}
	for pid, s := range sampleCPU() {
		use[s.kind] += s.used - before[pid].used
	}
	return use
}

// printCPU writes the p50 of each kind's CPU time over the runs, for a Flotilla change and
// for client-go's, beside the time the machine's cores offered in the change's p50.
func printCPU(w io.Writer, title string, flotilla, clientGo []cpuUse, flotillaWall, clientGoWall time.Duration) {
	if len(flotilla) == 0 || flotilla[0] == nil {
		return
	}
	fmt.Fprintf(w, "\n%s (CPU time each kind of process used from the start of the change until it was done, p50 over the runs)\n\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tflotilla\tclient-go\t")
	total := func(runs []cpuUse) []time.Duration {
		out := make([]time.Duration, len(runs))
		for i, u := range runs {
			for _, d := range u {
				out[i] += d
			}
		}
		return out
	}
	kind := func(runs []cpuUse, k string) []time.Duration {
		out := make([]time.Duration, len(runs))
		for i, u := range runs {
			out[i] = u[k]
		}
		return out
	}
	for _, k := range cpuKinds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", k, ms(summarise(kind(flotilla, k)).p50), ms(summarise(kind(clientGo, k)).p50))
	}
	fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", "all", ms(summarise(total(flotilla)).p50), ms(summarise(total(clientGo)).p50))
	cores := time.Duration(runtime.NumCPU())
	fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", fmt.Sprintf("the %d cores offered in the p50 wall time", cores), ms(flotillaWall*cores), ms(clientGoWall*cores))
	tw.Flush()
	if rss := peakRSS(); rss > 0 {
		fmt.Fprintf(w, "\nPeak memory of this process (every Flotilla service, NATS, the observers and simulated nodes): %d MiB\n", rss>>20)
	}
}

// peakRSS is this process's peak resident memory (VmHWM), or 0 where /proc cannot tell.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(rest) // "123456 kB"
			if len(f) == 2 {
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// profileWindow starts a CPU profile of this process for run's new placement when
// -window-profiles asks for one (not for warm-up runs), and returns what stops it. A
// profile of the windows alone shows what the stack does while it is measured, without
// the baselines and pauses around it.
func (b *bench) profileWindow(run string) (stop func(), err error) {
	if b.windowProfiles == "" || strings.HasPrefix(run, "w") {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(b.windowProfiles, "new-"+run+".prof"))
	if err != nil {
		return nil, fmt.Errorf("-window-profiles: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-window-profiles: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
