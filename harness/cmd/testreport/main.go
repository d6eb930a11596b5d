// Command testreport reads `go test -json` on stdin and prints what a person
// reading CI output needs: each package's result, the full output of every
// failed test, the lines where tests started real parts (PostgreSQL, NATS,
// kube-apiservers), and a closing tally. It exits non-zero when anything
// failed, or when the input ends without a result for a package (a crash).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// realParts matches harness log lines worth showing on success too.
var realParts = regexp.MustCompile(`started a real PostgreSQL|using PostgreSQL|embedded NATS server|real member API servers ready|API server ready|applied .* to member`)

// reportLine marks lines a test prints for the reader of CI output, such as a table of
// results (e2e/faults): shown on success too, each in full.
const reportLine = "report| "

// digits normalises a line for de-duplication: ports and durations differ
// from test to test, and one line per package and kind is enough.
var digits = regexp.MustCompile(`[0-9]+`)

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	start := time.Now()
	outputs := map[string][]string{} // package/test -> output lines
	shown := map[string]bool{}
	var passed, failed, skipped int
	var failedNames []string
	pkgDone := map[string]bool{}
	pkgSeen := map[string]bool{}

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			// Build errors and other non-JSON output: show as is.
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + " " + e.Test
		pkgSeen[e.Package] = true
		switch e.Action {
		case "output":
			outputs[key] = append(outputs[key], e.Output)
			if i := strings.Index(e.Output, reportLine); e.Test != "" && i >= 0 {
				msg := strings.TrimRight(e.Output[i+len(reportLine):], "\n")
				if seen := e.Package + "\x00" + msg; !shown[seen] {
					shown[seen] = true
					fmt.Fprintf(out, "  %s: %s\n", short(e.Package), msg)
				}
			} else if e.Test != "" && realParts.MatchString(e.Output) {
				msg := strings.TrimSpace(e.Output)
				if seen := e.Package + digits.ReplaceAllString(msg, "0"); !shown[seen] {
					shown[seen] = true
					fmt.Fprintf(out, "  %s: %s\n", short(e.Package), msg)
				}
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				pkgDone[e.Package] = true
				switch e.Action {
				case "fail":
					fmt.Fprintf(out, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
					for _, l := range outputs[key] {
						fmt.Fprint(out, "    ", l)
					}
				case "skip":
					fmt.Fprintf(out, "?   \t%s\t[no test files]\n", e.Package)
				default:
					fmt.Fprintf(out, "ok  \t%s\t%.1fs\n", e.Package, e.Elapsed)
				}
				delete(outputs, key)
				continue
			}
			if strings.Contains(e.Test, "/") {
				// Subtests count through their parents; their output is the parent's too.
				if e.Action == "fail" {
					outputs[e.Package+" "+strings.SplitN(e.Test, "/", 2)[0]] = append(outputs[e.Package+" "+strings.SplitN(e.Test, "/", 2)[0]], outputs[key]...)
				}
				delete(outputs, key)
				continue
			}
			switch e.Action {
			case "pass":
				passed++
			case "skip":
				skipped++
			case "fail":
				failed++
				failedNames = append(failedNames, e.Package+"."+e.Test)
				fmt.Fprintf(out, "--- FAIL: %s %s (%.2fs)\n", e.Package, e.Test, e.Elapsed)
				for _, l := range outputs[key] {
					fmt.Fprint(out, "    ", l)
				}
			}
			delete(outputs, key)
		}
	}
	var crashed []string
	for p := range pkgSeen {
		if !pkgDone[p] {
			crashed = append(crashed, p)
		}
	}
	sort.Strings(crashed)
	for _, p := range crashed {
		fmt.Fprintf(out, "FAIL\t%s: the test binary ended without a result\n", p)
		failed++
	}
	if len(failedNames) > 0 {
		fmt.Fprintln(out, "\nfailed tests:")
		for _, n := range failedNames {
			fmt.Fprintln(out, "  "+n)
		}
	}
	fmt.Fprintf(out, "\ntests took %s\n", time.Since(start).Round(time.Second))
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 {
		return 1
	}
	return 0
}

// short drops the module prefix from a package path.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/flotilla-dev/flotilla/")
}
