package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportLinesShownInFull: a passing test's report| lines (a table of results) reach the
// reader whole and in order, each once, while the rest of its output stays hidden.
func TestReportLinesShownInFull(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Test":"TestFaults","Output":"    faults_test.go:188: report| | fault | lost |\n"}`,
		`{"Action":"output","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Test":"TestFaults","Output":"    faults_test.go:188: report| | kill -9 rollout | 0 |\n"}`,
		`{"Action":"output","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Test":"TestFaults","Output":"    faults_test.go:188: report| | kill -9 status | 0 |\n"}`,
		`{"Action":"output","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Test":"TestFaults","Output":"    faults_test.go:99: chatter nobody needs\n"}`,
		`{"Action":"pass","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Test":"TestFaults","Elapsed":1}`,
		`{"Action":"pass","Package":"github.com/flotilla-dev/flotilla/e2e/faults","Elapsed":1}`,
	}, "\n")
	var out bytes.Buffer
	if code := run(strings.NewReader(in), &out); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	want := "  e2e/faults: | fault | lost |\n  e2e/faults: | kill -9 rollout | 0 |\n  e2e/faults: | kill -9 status | 0 |\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the table is not shown whole:\n%s", out.String())
	}
	if strings.Contains(out.String(), "chatter") {
		t.Errorf("a passing test's other output is shown:\n%s", out.String())
	}
}

// TestFailedBenchmarkFails: make test runs each benchmark once; one that fails is a failure
// with its output shown, and one that passes (go test -json sends no pass for it) is not
// counted at all.
func TestFailedBenchmarkFails(t *testing.T) {
	const pkg = "github.com/flotilla-dev/flotilla/services/apply/bench"
	in := strings.Join([]string{
		`{"Action":"run","Package":"` + pkg + `","Test":"TestA"}`,
		`{"Action":"pass","Package":"` + pkg + `","Test":"TestA","Elapsed":0}`,
		`{"Action":"run","Package":"` + pkg + `","Test":"BenchmarkOK"}`,
		`{"Action":"output","Package":"` + pkg + `","Test":"BenchmarkOK","Output":"BenchmarkOK-2 \t1\t100 ns/op\n"}`,
		`{"Action":"run","Package":"` + pkg + `","Test":"BenchmarkApply500"}`,
		`{"Action":"output","Package":"` + pkg + `","Test":"BenchmarkApply500","Output":"    bench_test.go:211: apply failed\n"}`,
		`{"Action":"fail","Package":"` + pkg + `","Test":"BenchmarkApply500"}`,
		`{"Action":"fail","Package":"` + pkg + `","Elapsed":6}`,
	}, "\n")
	var out bytes.Buffer
	if code := run(strings.NewReader(in), &out); code == 0 {
		t.Fatalf("exit 0 with a failed benchmark:\n%s", out.String())
	}
	for _, want := range []string{"--- FAIL: " + pkg + " BenchmarkApply500", "apply failed", "1 passed, 1 failed, 0 skipped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
