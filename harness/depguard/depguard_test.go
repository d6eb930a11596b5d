package depguard_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/depguard"
)

// recorder is a testing.TB that records failures instead of failing the
// test; Fatalf panics with the recorder to stop the check as Fatalf does.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(r)
}

func (r *recorder) check(rule depguard.Rule) []string {
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		rule.Check(r)
	}()
	return r.errors
}

func TestRule(t *testing.T) {
	const self = "github.com/flotilla-dev/flotilla/harness/depguard"
	tests := []struct {
		name string
		rule depguard.Rule
		// want are substrings of the failures, one each; none when the rule holds.
		want []string
	}{
		{name: "holds", rule: depguard.Rule{Packages: []string{"."}, Forbidden: []string{"k8s.io/client-go", "github.com/flotilla-dev/flotilla/events"}}},
		{name: "holds for an import path", rule: depguard.Rule{Packages: []string{self}, Forbidden: []string{"github.com/jackc/pgx"}}},
		{name: "a forbidden package and what reaches it",
			rule: depguard.Rule{Packages: []string{"."}, Forbidden: []string{"os/exec"}, Why: "no commands"},
			want: []string{". depends on " + self + " -> os/exec: no commands"}},
		{name: "below a forbidden path",
			rule: depguard.Rule{Packages: []string{self}, Forbidden: []string{"internal/"}, Allowed: []string{"internal/abi", "internal/goarch"}},
			want: []string{"-> bytes -> internal/bytealg", "more forbidden packages those import"}},
		{name: "a path is no prefix of its sibling",
			rule: depguard.Rule{Packages: []string{self}, Forbidden: []string{"os/exe", "bufi"}}},
		{name: "an empty listing",
			rule: depguard.Rule{Packages: []string{self + "/nothing/..."}, Forbidden: []string{"os"}},
			want: []string{"listed none of the packages; the guard would pass vacuously"}},
		{name: "no rule", rule: depguard.Rule{Packages: []string{"."}},
			want: []string{"a rule needs packages and forbidden paths"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := (&recorder{TB: t}).check(tc.rule)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Errorf("failures %q, want none", got)
				}
				return
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("failures %q, want one holding %q", got, w)
				}
			}
		})
	}
}
