package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// stats summarises one measurement over the runs.
type stats struct {
	n                  int
	p50, p90, min, max time.Duration
}

// summarise uses the nearest-rank percentile: p90 of 20 runs is the 18th fastest.
func summarise(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := slices.Sorted(slices.Values(ds))
	return stats{n: len(s), p50: nearestRank(s, 0.5), p90: nearestRank(s, 0.9), min: s[0], max: s[len(s)-1]}
}

// nearestRank is the p-th percentile of sorted, which is not empty.
func nearestRank[T cmp.Ordered](sorted []T, p float64) T {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// results are every run's measurements.
type results struct {
	flotilla         []placementRun
	kubectl, clientG []baselineRun
}

func (r *results) series(pick func(placementRun) milestones, label string) []time.Duration {
	var out []time.Duration
	for _, run := range r.flotilla {
		if d, ok := pick(run)[label]; ok {
			out = append(out, d)
		}
	}
	return out
}

func baselineSeries(runs []baselineRun, pick func(baselineRun) time.Duration) []time.Duration {
	out := make([]time.Duration, len(runs))
	for i, r := range runs {
		out[i] = pick(r)
	}
	return out
}

func creates(r placementRun) milestones    { return r.create }
func updates(r placementRun) milestones    { return r.update }
func createOf(r baselineRun) time.Duration { return r.create }
func updateOf(r baselineRun) time.Duration { return r.update }

// print writes the summary table and the timelines of the two Flotilla changes.
func (r *results) print(w io.Writer, members int, strategy string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\nFlotilla latency, %d runs, %d local members (kube-apiserver + etcd, simulated nodes), %s\n\n",
		len(r.flotilla), members, strategy)
	fmt.Fprintln(tw, "\tp50\tp90\tmin\tmax\tp50 ÷ kubectl\tp50 ÷ client-go\t")
	section := func(title string, flot func(placementRun) milestones, base func(baselineRun) time.Duration, rows [][2]string) {
		kc := summarise(baselineSeries(r.kubectl, base))
		cg := summarise(baselineSeries(r.clientG, base))
		fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\n", title)
		for _, row := range rows {
			s := summarise(r.series(flot, row[1]))
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row[0], ms(s.p50), ms(s.p90), ms(s.min), ms(s.max),
				ratio(s.p50, kc.p50), ratio(s.p50, cg.p50))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\t%s\t\n", "kubectl apply --server-side, 3 members in sequence",
			ms(kc.p50), ms(kc.p90), ms(kc.min), ms(kc.max), ratio(kc.p50, cg.p50))
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t\t\t\n", "client-go SSA, all members and objects in parallel",
			ms(cg.p50), ms(cg.p90), ms(cg.min), ms(cg.max))
	}
	section(fmt.Sprintf("new placement: namespace + %d objects, PickAll", objectsPerNamespace-1), creates, createOf, [][2]string{
		{"flotilla: apply → Applied=True on all members (status query)", msAppliedAll},
		{"flotilla: apply → Applied=True on all members (status event)", msAppliedAllEvent},
		{"flotilla: apply → every object on every member (watch)", msAllMembers},
	})
	section("hub change: one ConfigMap edited", updates, updateOf, [][2]string{
		{"flotilla: apply → every member updated (watch)", msAllMembers},
		{"flotilla: apply → Applied=True for the new resource index (status query)", msAppliedAll},
		{"flotilla: apply → Applied=True for the new resource index (status event)", msAppliedAllEvent},
	})
	tw.Flush()

	r.timeline(w, "Where a new placement's time goes", creates)
	r.timeline(w, "Where a hub change's time goes", updates)

	var flot, cg []cpuUse
	for i := range r.flotilla {
		flot, cg = append(flot, r.flotilla[i].createCPU), append(cg, r.clientG[i].createCPU)
	}
	printCPU(w, "Who used the CPU in a new placement", flot, cg,
		summarise(r.series(creates, msAppliedAll)).p50, summarise(baselineSeries(r.clientG, createOf)).p50)

	var flotReqs, cgReqs []apiCounts
	for i := range r.flotilla {
		if r.flotilla[i].createRequests != nil {
			flotReqs, cgReqs = append(flotReqs, r.flotilla[i].createRequests), append(cgReqs, r.clientG[i].createRequests)
		}
	}
	printRequests(w, "What the members' API servers were asked in a new placement (-requests)", flotReqs, cgReqs)
}

// timeline prints every milestone of a change, ordered by its median offset from the
// change's start, with the median step from the previous one.
func (r *results) timeline(w io.Writer, title string, pick func(placementRun) milestones) {
	labels := map[string]bool{}
	for _, run := range r.flotilla {
		for l := range pick(run) {
			labels[l] = true
		}
	}
	type row struct {
		label string
		s     stats
	}
	var rows []row
	for l := range labels {
		rows = append(rows, row{l, summarise(r.series(pick, l))})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].s.p50 != rows[j].s.p50 {
			return rows[i].s.p50 < rows[j].s.p50
		}
		return rows[i].label < rows[j].label
	})
	fmt.Fprintf(w, "\n%s (offsets from the start of fleetctl apply; step = p50 minus the previous p50)\n\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tp50\tp90\tstep\truns\t")
	var prev time.Duration
	for _, x := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t+%s\t%d\t\n", x.label, ms(x.s.p50), ms(x.s.p90), ms(x.s.p50-prev), x.s.n)
		prev = x.s.p50
	}
	tw.Flush()
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", float64(a)/float64(b))
}

// runLine is the progress line printed after each run.
func runLine(label string, f placementRun, k, c baselineRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run %s: flotilla new %s (members %s), change %s (members %s); kubectl %s / %s; client-go %s / %s",
		label, ms(f.create[msAppliedAll]), ms(f.create[msAllMembers]), ms(f.update[msAppliedAll]), ms(f.update[msAllMembers]),
		ms(k.create), ms(k.update), ms(c.create), ms(c.update))
	return b.String()
}
