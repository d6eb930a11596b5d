package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/sync/errgroup"
)

// The members' API servers use more CPU in a new placement's window under Flotilla than
// under bare client-go, for the same objects. -requests says what they were asked: each
// API server's request and watch-event counters (/metrics) before and after the window,
// summed over the members.

// apiCounts are counters summed over the members, keyed "VERB resource[/subresource]"
// for requests and "watch event resource" for events sent to watchers.
type apiCounts map[string]float64

// sampleRequests reads every member's counters.
func (b *bench) sampleRequests(ctx context.Context) (apiCounts, error) {
	per := make([]apiCounts, len(b.members))
	g, gctx := errgroup.WithContext(ctx)
	for i, m := range b.members {
		g.Go(func() error {
			raw, err := m.raw.Get().AbsPath("/metrics").DoRaw(gctx)
			if err != nil {
				return fmt.Errorf("member %s: read /metrics: %w", m.name, err)
			}
			per[i], err = parseAPICounts(bytes.NewReader(raw))
			if err != nil {
				return fmt.Errorf("member %s: /metrics: %w", m.name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sum := apiCounts{}
	for _, c := range per {
		for k, v := range c {
			sum[k] += v
		}
	}
	return sum, nil
}

// since is what c counted after before.
func (c apiCounts) since(before apiCounts) apiCounts {
	out := apiCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// parseAPICounts reads apiserver_request_total and apiserver_watch_events_total from a
// Prometheus text exposition. Requests to paths other than resources (/metrics itself,
// /healthz, discovery) have no resource and are left out.
func parseAPICounts(r io.Reader) (apiCounts, error) {
	out := apiCounts{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var key string
		var labels map[string]string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			labels = promLabels(line)
			if labels["resource"] == "" {
				continue
			}
			key = labels["verb"] + " " + labels["resource"]
			if s := labels["subresource"]; s != "" {
				key += "/" + s
			}
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			labels = promLabels(line)
			what := labels["resource"] // the label was kind before Kubernetes 1.30
			if what == "" {
				what = labels["kind"]
			}
			key = "watch event " + what
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		out[key] += v
	}
	return out, sc.Err()
}

// promLabels returns the labels of one sample line, name{a="x",b="y"} value. Label values
// of these two counters hold no quotes or commas.
func promLabels(line string) map[string]string {
	open, closing := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	out := map[string]string{}
	if open < 0 || closing < open {
		return out
	}
	for _, kv := range strings.Split(line[open+1:closing], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// printRequests prints, per counter, its p50 over the runs for Flotilla and client-go,
// the largest first.
func printRequests(w io.Writer, title string, flotilla, clientGo []apiCounts) {
	if len(flotilla) == 0 {
		return
	}
	keys := map[string]bool{}
	for _, runs := range [][]apiCounts{flotilla, clientGo} {
		for _, c := range runs {
			for k := range c {
				keys[k] = true
			}
		}
	}
	type row struct {
		key    string
		f, cgo float64
	}
	var rows []row
	var totalF, totalC []float64
	for k := range keys {
		rows = append(rows, row{k, medianOf(flotilla, k), medianOf(clientGo, k)})
	}
	for i := range flotilla {
		totalF = append(totalF, requestsIn(flotilla[i]))
	}
	for i := range clientGo {
		totalC = append(totalC, requestsIn(clientGo[i]))
	}
	sort.Slice(rows, func(i, j int) bool {
		if a, b := max(rows[i].f, rows[i].cgo), max(rows[j].f, rows[j].cgo); a != b {
			return a > b
		}
		return rows[i].key < rows[j].key
	})
	fmt.Fprintf(w, "\n%s (summed over the members, p50 over the runs)\n\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tflotilla\tclient-go\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t\n", r.key, r.f, r.cgo)
	}
	fmt.Fprintf(tw, "requests, all\t%.0f\t%.0f\t\n", median(totalF), median(totalC))
	tw.Flush()
}

// requestsIn is the number of requests c counted, watch events aside.
func requestsIn(c apiCounts) float64 {
	var n float64
	for k, v := range c {
		if !strings.HasPrefix(k, "watch event ") {
			n += v
		}
	}
	return n
}

// medianOf is key's p50 over runs, nearest rank as summarise's.
func medianOf(runs []apiCounts, key string) float64 {
	vs := make([]float64, len(runs))
	for i, c := range runs {
		vs[i] = c[key]
	}
	return median(vs)
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	return nearestRank(slices.Sorted(slices.Values(vs)), 0.5)
}

// requestsBefore samples the counters before a window, with -requests; nil without.
func (b *bench) requestsBefore(ctx context.Context) (apiCounts, error) {
	if !b.requests {
		return nil, nil
	}
	return b.sampleRequests(ctx)
}

// requestsSince is what the counters counted since before; nil without -requests.
func (b *bench) requestsSince(ctx context.Context, before apiCounts) (apiCounts, error) {
	if before == nil {
		return nil, nil
	}
	after, err := b.sampleRequests(ctx)
	if err != nil {
		return nil, err
	}
	return after.since(before), nil
}
