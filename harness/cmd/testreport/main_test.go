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
