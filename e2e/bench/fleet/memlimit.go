package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// defaultMemoryLimits is the hub's memory budget for make bench-scale: the GOMEMLIMIT
// each process runs with, as docker-compose.yaml sets it. Go's collector lets a heap grow to twice
// what it keeps live before it collects; at 5,000 members nats-server keeps about 260 MiB
// live (one durable consumer per member), the status service about 130 MiB (its fold
// cache) and the scheduler about 90 MiB (the members and its decisions kept decoded), so
// without a limit they reach 760, 340-395 and 200 MiB. With these limits they collect
// sooner instead. The rollout stays under 80 MiB without one.
const defaultMemoryLimits = "nats-server=448MiB,scheduler=160MiB,status=256MiB"

// memoryLimits is the -memory-limits flag: process name → GOMEMLIMIT value.
type memoryLimits map[string]string

// goMemLimit is the syntax the Go runtime takes in GOMEMLIMIT.
var goMemLimit = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB|TiB)?$`)

func (m *memoryLimits) String() string {
	if m == nil || len(*m) == 0 {
		return "none"
	}
	var parts []string
	for name, v := range *m {
		parts = append(parts, name+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Set takes "name=limit,..." (a name is nats-server or a hub service, a limit is
// GOMEMLIMIT's syntax: 448MiB) or "none".
func (m *memoryLimits) Set(v string) error {
	out := memoryLimits{}
	if v != "none" && v != "" {
		known := append([]string{"nats-server"}, hubServiceNames...)
		for part := range strings.SplitSeq(v, ",") {
			name, limit, ok := strings.Cut(strings.TrimSpace(part), "=")
			switch {
			case !ok:
				return fmt.Errorf("%q: want name=limit, as in nats-server=448MiB", part)
			case !slices.Contains(known, name):
				return fmt.Errorf("%q: no process %q (there are %s)", part, name, strings.Join(known, ", "))
			case !goMemLimit.MatchString(limit):
				return fmt.Errorf("%q: %q is not a GOMEMLIMIT value (a number of bytes, or with KiB, MiB, GiB or TiB)", part, limit)
			}
			out[name] = limit
		}
	}
	*m = out
	return nil
}

// env is the environment entry that sets the process's limit, if it has one.
func (m memoryLimits) env(name string) []string {
	if v, ok := m[name]; ok {
		return []string{"GOMEMLIMIT=" + v}
	}
	return nil
}
