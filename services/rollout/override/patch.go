package override

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// The JSON patch operations of RFC 6902 that overrides use (add, remove,
// replace), on a document decoded into maps, slices and scalars. As in
// upstream Fleet (evanphx/json-patch), the parent of an added value must exist
// and a removed or replaced value must exist: a patch never creates objects
// along its path.

// errMissing is the error of a path that does not exist in the document.
var errMissing = errors.New("the path does not exist in the object")

// applyPatch applies one operation to doc, returning the new document (the
// root changes only when the path is the whole document).
func applyPatch(doc any, op api.JSONPatchOverrideOperator, path string, value any) (any, error) {
	tokens, err := pointer(path)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		switch op {
		case api.JSONPatchOverrideOpAdd, api.JSONPatchOverrideOpReplace:
			return value, nil
		}
		return nil, errors.New("cannot remove the whole object")
	}
	parent, err := walk(doc, tokens[:len(tokens)-1])
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		return doc, patchObject(p, op, last, value)
	case []any:
		list, err := patchList(p, op, last, value)
		if err != nil {
			return nil, err
		}
		// A slice that grows or shrinks is a new slice: put it back in its parent.
		return setAt(doc, tokens[:len(tokens)-1], list)
	default:
		return nil, fmt.Errorf("%w: the parent of %q is %s, not an object or a list", errMissing, "/"+strings.Join(escapeAll(tokens), "/"), describe(parent))
	}
}

func patchObject(obj map[string]any, op api.JSONPatchOverrideOperator, key string, value any) error {
	_, exists := obj[key]
	switch op {
	case api.JSONPatchOverrideOpAdd:
		obj[key] = value
	case api.JSONPatchOverrideOpReplace:
		if !exists {
			return errMissing
		}
		obj[key] = value
	case api.JSONPatchOverrideOpRemove:
		if !exists {
			return errMissing
		}
		delete(obj, key)
	default:
		return fmt.Errorf("unsupported operation %q", op)
	}
	return nil
}

func patchList(list []any, op api.JSONPatchOverrideOperator, token string, value any) ([]any, error) {
	if op == api.JSONPatchOverrideOpAdd && token == "-" {
		return append(list, value), nil
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || (token != "0" && strings.HasPrefix(token, "0")) {
		return nil, fmt.Errorf("%q is not an index of a list", token)
	}
	switch op {
	case api.JSONPatchOverrideOpAdd:
		if i > len(list) {
			return nil, fmt.Errorf("%w: index %d is past the end of a list of %d", errMissing, i, len(list))
		}
		out := make([]any, 0, len(list)+1)
		out = append(append(append(out, list[:i]...), value), list[i:]...)
		return out, nil
	case api.JSONPatchOverrideOpReplace, api.JSONPatchOverrideOpRemove:
		if i >= len(list) {
			return nil, fmt.Errorf("%w: index %d is past the end of a list of %d", errMissing, i, len(list))
		}
		if op == api.JSONPatchOverrideOpReplace {
			list[i] = value
			return list, nil
		}
		return append(list[:i:i], list[i+1:]...), nil
	}
	return nil, fmt.Errorf("unsupported operation %q", op)
}

// walk follows tokens from doc and returns the value there.
func walk(doc any, tokens []string) (any, error) {
	cur := doc
	for _, t := range tokens {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, errMissing
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, errMissing
			}
			cur = c[i]
		default:
			return nil, errMissing
		}
	}
	return cur, nil
}

// setAt replaces the value at tokens (which exists) with v.
func setAt(doc any, tokens []string, v any) (any, error) {
	if len(tokens) == 0 {
		return v, nil
	}
	parent, err := walk(doc, tokens[:len(tokens)-1])
	if err != nil {
		return nil, err
	}
	last := tokens[len(tokens)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
	case []any:
		i, _ := strconv.Atoi(last) // walked already: a valid index
		p[i] = v
	}
	return doc, nil
}

// pointer splits an RFC 6901 JSON pointer into its unescaped tokens.
func pointer(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with /", path)
	}
	parts := strings.Split(path[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func escapeAll(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return out
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
