// Package printer renders placements, member clusters, history and takeover
// decisions the way kubectl renders objects: tables, YAML, JSON, jsonpath
// templates and names, plus fleetctl's describe, history and takeovers views.
package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"
)

// Format is an output format.
type Format string

const (
	Table          Format = "table"
	Wide           Format = "wide"
	YAML           Format = "yaml"
	JSON           Format = "json"
	Name           Format = "name"
	JSONPath       Format = "jsonpath"
	JSONPathAsJSON Format = "jsonpath-as-json"
)

// Output is a parsed -o value.
type Output struct {
	Format Format
	// Template is the jsonpath template of JSONPath and JSONPathAsJSON.
	Template string
}

// Formats lists the -o values, for help and errors.
const Formats = "table, wide, yaml, json, name, jsonpath=TEMPLATE, jsonpath-as-json=TEMPLATE, jsonpath-file=FILE"

// ParseOutput parses a -o value as kubectl does: "" is a table, and the
// jsonpath formats take their template after "=" (jsonpath-file reads it
// from a file).
func ParseOutput(s string) (Output, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	switch Format(name) {
	case "", Table:
		if !hasArg {
			return Output{Format: Table}, nil
		}
	case Wide, YAML, JSON, Name:
		if !hasArg {
			return Output{Format: Format(name)}, nil
		}
	case JSONPath, JSONPathAsJSON:
		if arg == "" {
			return Output{}, fmt.Errorf("output format %s needs a template, e.g. -o %s='{.metadata.name}'", name, name)
		}
		return Output{Format: Format(name), Template: arg}, nil
	case "jsonpath-file":
		if arg == "" {
			return Output{}, fmt.Errorf("output format jsonpath-file needs a file name, e.g. -o jsonpath-file=template.txt")
		}
		data, err := os.ReadFile(arg)
		if err != nil {
			return Output{}, fmt.Errorf("read jsonpath template: %w", err)
		}
		return Output{Format: JSONPath, Template: string(data)}, nil
	}
	return Output{}, fmt.Errorf("unknown output format %q; use one of %s", s, Formats)
}

// Check reports a template that does not parse, before anything is queried.
func (o Output) Check() error {
	if o.Format == JSONPath || o.Format == JSONPathAsJSON {
		_, err := newJSONPath(o)
		return err
	}
	return nil
}

func newJSONPath(o Output) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("out")
	if err := j.Parse(o.Template); err != nil {
		return nil, fmt.Errorf("error parsing jsonpath %s, %w", o.Template, err)
	}
	// As kubectl: missing keys print nothing rather than fail, and
	// jsonpath-as-json prints the results as a JSON array.
	j.AllowMissingKeys(true)
	j.EnableJSONOutput(o.Format == JSONPathAsJSON)
	return j, nil
}

// printStructured prints v (an object, or a list of them) in a structured
// format. v goes through JSON first, so that jsonpath sees the same field
// names as the JSON output, as kubectl's printers do.
func printStructured(w io.Writer, o Output, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	switch o.Format {
	case JSON:
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "    "); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		buf.WriteByte('\n')
		_, err := buf.WriteTo(w)
		return err
	case YAML:
		out, err := yaml.JSONToYAML(escapeForYAML(data))
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = w.Write(out)
		return err
	case JSONPath, JSONPathAsJSON:
		j, err := newJSONPath(o)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(data, &generic); err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		if err := j.Execute(w, generic); err != nil {
			return fmt.Errorf("error executing jsonpath %q: %w", o.Template, err)
		}
		return nil
	}
	return fmt.Errorf("output format %s is not structured", o.Format)
}

// escapeForYAML escapes, as JSON \u escapes, the characters that
// encoding/json leaves as they are but a YAML parser refuses (DEL, the C1
// controls, U+FFFE and U+FFFF) or reads as a line break (NEL), so that a
// status message holding one still prints as YAML, unchanged. Such
// characters can only be inside JSON strings.
func escapeForYAML(data []byte) []byte {
	refused := func(r rune) bool {
		return r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0xfffe || r == 0xffff
	}
	if !bytes.ContainsFunc(data, refused) {
		return data
	}
	var b bytes.Buffer
	for _, r := range string(data) {
		if refused(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.Bytes()
}

// list is the v1 List kubectl prints when it gets several objects.
type list struct {
	APIVersion string         `json:"apiVersion"`
	Items      []any          `json:"items"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
}

func newList[T any](items []T) list {
	l := list{APIVersion: "v1", Kind: "List", Items: make([]any, 0, len(items)), Metadata: map[string]any{"resourceVersion": ""}}
	for i := range items {
		l.Items = append(l.Items, &items[i])
	}
	return l
}
