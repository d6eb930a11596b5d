package api

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// maxAliasExpansion bounds the nodes that YAML aliases may add to a document
// when expanded. Manifests rarely use aliases at all; a few thousand nodes of
// repeated configuration are plenty, while a "billion laughs" document of a
// few hundred bytes expands to billions.
const maxAliasExpansion = 100_000

// aliasProblem reports a document that cannot be walked node by node: one
// whose aliases refer to a node they are inside of (the tree is infinite,
// e.g. `a: &a [*a]`), or expand it by more than maxAliasExpansion nodes. The
// decoder's walkers follow aliases, so either would never end or overflow the
// stack.
func aliasProblem(root *yaml.Node) error {
	const limit = 1 << 40         // sizes saturate here, far above any document
	size := map[*yaml.Node]int{}  // expanded size of each node walked
	open := map[*yaml.Node]bool{} // nodes being walked: an alias to one is a cycle
	var expand func(n *yaml.Node) (int, error)
	expand = func(n *yaml.Node) (int, error) {
		if n.Kind == yaml.AliasNode {
			if n.Alias == nil {
				return 1, nil
			}
			if open[n.Alias] {
				return 0, fmt.Errorf("the YAML alias *%s on line %d refers to a node it is inside of", n.Value, n.Line)
			}
			s, err := expand(n.Alias)
			return min(s+1, limit), err
		}
		if s, done := size[n]; done {
			return s, nil
		}
		open[n] = true
		s := 1
		for _, c := range n.Content {
			cs, err := expand(c)
			if err != nil {
				return 0, err
			}
			s = min(s+cs, limit)
		}
		delete(open, n)
		size[n] = s
		return s, nil
	}
	expanded, err := expand(root)
	if err != nil {
		return err
	}
	// len(size) counts each node once, as written.
	if expanded-len(size) > maxAliasExpansion {
		return fmt.Errorf("the document's YAML aliases expand it by more than %d nodes", maxAliasExpansion)
	}
	return nil
}
