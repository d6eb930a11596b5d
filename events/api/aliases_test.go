package api

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// laughs is a "billion laughs" document: each level repeats the one before
// nine times, so levels levels expand to 9^levels strings.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := range 9 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// Found by FuzzDecodeAll: the decoder's walkers follow aliases, so an alias
// inside the node it names overflowed the stack (a crash no recover catches),
// and nested aliases took time exponential in the input's size (15 s for
// the 400 bytes of 9 levels, 20 minutes for 11).
func TestDecodeRefusesRecursiveAndExplodingAliases(t *testing.T) {
	tests := []struct {
		name, input, want string
	}{
		{"alias inside its anchor", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\na: &a [*a]\n",
			"the YAML alias *a on line 5 refers to a node it is inside of"},
		{"alias inside its anchor in a mapping", "apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: x\n  labels: *m\n",
			"the YAML alias *m on line 5 refers to a node it is inside of"},
		{"typed kind", "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata: {name: x}\nspec: &s {policy: *s}\n",
			"refers to a node it is inside of"},
		{"list item", "apiVersion: v1\nkind: List\nitems: &i [*i]\n", "refers to a node it is inside of"},
		{"billion laughs", laughs(11), "the document's YAML aliases expand it by more than 100000 nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := DecodeAll(strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one saying %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

// Aliases that expand moderately still decode, merge keys included.
func TestDecodeKeepsOrdinaryAliases(t *testing.T) {
	input := `apiVersion: v1
kind: ConfigMap
metadata:
  name: x
  labels: &labels {app: web, tier: front}
  annotations:
    <<: *labels
data:
  a: &text hello
  b: *text
`
	obj, err := Decode([]byte(input))
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.GetAnnotations()["app"]; got != "web" {
		t.Errorf("merged annotation app = %q, want web", got)
	}
	if _, err := Decode([]byte(laughs(2))); err != nil {
		t.Errorf("81 strings through aliases: %v", err)
	}
}
