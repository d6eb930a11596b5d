package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// walker checks a YAML tree against the Go type it will decode into, before
// decoding: unknown fields (with a suggestion), duplicate keys and values of
// the wrong shape are reported with their path and line. On the way it
// canonicalises enum values written in another case and takes documentation
// placeholders ("...") out of the tree, remembering where they were.
type walker struct {
	line         func(*yaml.Node) int
	errs         ErrorList
	warnings     []string
	placeholders []string
}

func (w *walker) fail(t ErrorType, path *field.Path, n *yaml.Node, detail string) {
	w.errs = append(w.errs, &FieldError{Type: t, Field: path.String(), Detail: detail, Line: w.line(n)})
}

// Types that decode from a scalar through their own UnmarshalJSON.
var (
	timeType     = reflect.TypeFor[metav1.Time]()
	durationType = reflect.TypeFor[metav1.Duration]()
	intstrType   = reflect.TypeFor[intstr.IntOrString]()
	quantityType = reflect.TypeFor[resource.Quantity]()
	unmarshaler  = reflect.TypeFor[json.Unmarshaler]()
)

func (w *walker) walk(n *yaml.Node, t reflect.Type, path *field.Path) {
	n = resolveAlias(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(n) {
		return // null leaves the Go value at its zero value, as JSON does
	}
	if _, isEnum := enumValues[t]; isEnum {
		w.walkEnum(n, t, path)
		return
	}
	switch t {
	case timeType:
		w.walkScalar(n, path, "a time such as 2024-01-02T15:04:05Z", func(s string) bool {
			_, err := time.Parse(time.RFC3339, s)
			return err == nil
		})
		return
	case durationType:
		w.walkScalar(n, path, "a duration such as 1m30s", func(s string) bool {
			_, err := time.ParseDuration(s)
			return err == nil
		})
		return
	case intstrType:
		w.walkScalar(n, path, "an integer or a percentage such as 25%", func(string) bool { return true })
		return
	case quantityType:
		w.walkScalar(n, path, "a quantity such as 500m or 4Gi", func(s string) bool {
			_, err := resource.ParseQuantity(s)
			return err == nil
		})
		return
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		// Opaque to us (RawExtension, FieldsV1): only check for duplicate keys.
		w.walkAny(n, path)
		return
	}

	switch t.Kind() {
	case reflect.Struct:
		w.walkStruct(n, t, path)
	case reflect.Map:
		w.walkMap(n, t, path)
	case reflect.Slice:
		w.walkSlice(n, t, path)
	case reflect.String:
		w.walkString(n, path)
	case reflect.Bool:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
			// YAML 1.1 booleans, which kubectl accepts.
			switch strings.ToLower(n.Value) {
			case "yes", "on", "y":
				n.Value, n.Tag, n.Style = "true", "!!bool", 0
				return
			case "no", "off", "n":
				n.Value, n.Tag, n.Style = "false", "!!bool", 0
				return
			}
		}
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			w.fail(ErrorTypeWrongType, path, n, "must be true or false, not "+describeNode(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			w.fail(ErrorTypeWrongType, path, n, "must be an integer, not "+describeNode(n))
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			w.fail(ErrorTypeWrongType, path, n, "must be a number, not "+describeNode(n))
		}
	case reflect.Interface:
		w.walkAny(n, path)
	}
}

func (w *walker) walkStruct(n *yaml.Node, t reflect.Type, path *field.Path) {
	if n.Kind != yaml.MappingNode {
		w.fail(ErrorTypeWrongType, path, n, "must be an object, not "+describeNode(n))
		return
	}
	fields := jsonFields(t)
	seen := map[string]int{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			w.walkMerge(v, t, path)
			kept = append(kept, k, v)
			continue
		}
		p := child(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			w.fail(ErrorTypeDuplicate, p, k, fmt.Sprintf("appears twice (first on line %d)", first))
			continue
		}
		seen[k.Value] = w.line(k)
		ft, ok := fields[k.Value]
		if !ok {
			detail := "unknown field"
			if s := suggest(k.Value, fields); s != "" {
				detail += fmt.Sprintf("; did you mean %q?", s)
			}
			w.fail(ErrorTypeUnknownField, p, k, detail)
			continue
		}
		if isPlaceholder(v) && isComposite(ft) {
			w.placeholders = append(w.placeholders, p.String())
			continue // drop the pair
		}
		w.walk(v, ft, p)
		kept = append(kept, k, v)
	}
	n.Content = kept
}

// walkMerge checks the mappings merged in with "<<".
func (w *walker) walkMerge(v *yaml.Node, t reflect.Type, path *field.Path) {
	v = resolveAlias(v)
	if v.Kind == yaml.SequenceNode {
		for _, m := range v.Content {
			w.walk(m, t, path)
		}
		return
	}
	w.walk(v, t, path)
}

func (w *walker) walkMap(n *yaml.Node, t reflect.Type, path *field.Path) {
	if n.Kind != yaml.MappingNode {
		w.fail(ErrorTypeWrongType, path, n, "must be an object, not "+describeNode(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := path.Key(k.Value)
		if first, dup := seen[k.Value]; dup {
			w.fail(ErrorTypeDuplicate, p, k, fmt.Sprintf("appears twice (first on line %d)", first))
			continue
		}
		seen[k.Value] = w.line(k)
		w.walk(v, t.Elem(), p)
	}
}

func (w *walker) walkSlice(n *yaml.Node, t reflect.Type, path *field.Path) {
	if n.Kind != yaml.SequenceNode {
		w.fail(ErrorTypeWrongType, path, n, "must be a list, not "+describeNode(n))
		return
	}
	elem := t.Elem()
	kept := n.Content[:0:0]
	for i, item := range n.Content {
		if isPlaceholder(item) && isComposite(elem) {
			w.placeholders = append(w.placeholders, path.Index(i).String())
			continue
		}
		w.walk(item, elem, path.Index(i))
		kept = append(kept, item)
	}
	n.Content = kept
}

func (w *walker) walkString(n *yaml.Node, path *field.Path) {
	if n.Kind != yaml.ScalarNode {
		w.fail(ErrorTypeWrongType, path, n, "must be a string, not "+describeNode(n))
		return
	}
	switch n.ShortTag() {
	case "!!str":
		// yaml.v3 reads yes/no/on/off as strings, but sigs.k8s.io/yaml (YAML
		// 1.1) would read them as booleans later; the schema says string, so
		// keep them strings.
		if n.Style == 0 && isYAML11Bool(n.Value) {
			n.Style = yaml.DoubleQuotedStyle
		}
	case "!!timestamp", "!!binary":
		// Read as strings by sigs.k8s.io/yaml.
	default:
		w.fail(ErrorTypeWrongType, path, n, fmt.Sprintf("must be a string, not %s; write it in quotes: %q", describeNode(n), n.Value))
	}
}

func (w *walker) walkScalar(n *yaml.Node, path *field.Path, want string, ok func(string) bool) {
	if n.Kind != yaml.ScalarNode || !ok(n.Value) {
		w.fail(ErrorTypeWrongType, path, n, fmt.Sprintf("must be %s, not %s", want, describeNode(n)))
	}
}

func (w *walker) walkEnum(n *yaml.Node, t reflect.Type, path *field.Path) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		w.fail(ErrorTypeWrongType, path, n, fmt.Sprintf("must be one of %s, not %s", strings.Join(enumValues[t], ", "), describeNode(n)))
		return
	}
	if canonical, ok := canonicalEnum(t, n.Value); ok && canonical != n.Value {
		w.warnings = append(w.warnings, fmt.Sprintf("%s: read %q as %q", path, n.Value, canonical))
		n.Value = canonical
	}
	// An unknown value is left for Validate, which lists the allowed ones.
}

// walkAny checks an untyped subtree for duplicate keys only.
func (w *walker) walkAny(n *yaml.Node, path *field.Path) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				continue
			}
			p := child(path, k.Value)
			if first, dup := seen[k.Value]; dup {
				w.fail(ErrorTypeDuplicate, p, k, fmt.Sprintf("appears twice (first on line %d)", first))
				continue
			}
			seen[k.Value] = w.line(k)
			w.walkAny(v, p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			w.walkAny(item, path.Index(i))
		}
	}
}

func child(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// isPlaceholder recognises the "..." that documentation writes in place of content.
func isPlaceholder(n *yaml.Node) bool {
	n = resolveAlias(n)
	return n.Kind == yaml.ScalarNode && n.Style == 0 && (n.Value == "..." || n.Value == "…")
}

// isComposite reports whether t decodes from an object or a list, where a
// placeholder cannot be a real value.
func isComposite(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType, durationType, intstrType, quantityType:
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice:
		return true
	}
	return false
}

func isYAML11Bool(s string) bool {
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off":
		return true
	}
	return false
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the JSON names of t's fields (including those of embedded
// inline structs) to their types, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, exists := m[k]; !exists {
						m[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}

// suggest returns the known field closest to name, or "" if none is close.
func suggest(name string, fields map[string]reflect.Type) string {
	best, bestDist := "", len(name)/3+2
	for f := range fields {
		if strings.EqualFold(f, name) {
			return f
		}
		lf, ln := strings.ToLower(f), strings.ToLower(name)
		d := editDistance(ln, lf)
		if min(len(lf), len(ln)) >= 4 && (strings.HasPrefix(lf, ln) || strings.HasPrefix(ln, lf)) {
			d = min(d, 1) // a truncated or extended name: heartbeatPeriod for heartbeatPeriodSeconds
		}
		if d < bestDist || (d == bestDist && best != "" && f < best) {
			best, bestDist = f, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
