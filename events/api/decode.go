package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// Object is what Decode returns: one of the typed kinds of this package (a
// pointer to the struct knownKinds names for its group, version and kind) or,
// for any other Kubernetes manifest, an *unstructured.Unstructured hub resource.
type Object interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// Document is one decoded object of a YAML or JSON stream.
type Document struct {
	// Index is the 0-based position of the document in the stream; empty
	// documents (only comments or whitespace) are not counted.
	Index int
	// Item is the position inside a v1 List document, whose items are returned
	// as separate Documents; -1 for a document that is not a List.
	Item int
	// Line is the 1-based line where the object starts.
	Line int
	// Object is the decoded object.
	Object Object
	// Warnings describe what the decoder normalised, e.g. an enum value read
	// case-insensitively or a single object read as a one-element list.
	Warnings []string
}

// Decode decodes one YAML or JSON document. It fails if data holds no object
// or more than one.
func Decode(data []byte) (Object, error) {
	docs, err := DecodeAll(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, errors.New("decode: the input holds no object")
	case 1:
		return docs[0].Object, nil
	default:
		return nil, fmt.Errorf("decode: expected one object, found %d (several documents or a List); use DecodeAll", len(docs))
	}
}

// DecodeAll decodes a stream of YAML documents separated by "---", or of JSON
// objects. Known kinds decode into their typed structs, strictly: unknown
// fields, duplicate keys and values of the wrong type are errors naming the
// field path. Any other manifest becomes an *unstructured.Unstructured; the
// items of a v1 List become separate Documents.
//
// Every document is decoded even when an earlier one fails; the returned error
// joins one *DocumentError per failed document, and the returned Documents are
// those that decoded. A YAML syntax error ends the stream.
func DecodeAll(r io.Reader) ([]Document, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("decode: read input: %w", err)
	}
	data, nbspLines := replaceNBSPIndentation(data)
	raws, splitErr := splitDocuments(data)

	var docs []Document
	var errs []error
	for i, raw := range raws {
		d, err := decodeDocument(i, raw)
		docs = append(docs, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if splitErr != nil {
		errs = append(errs, &DocumentError{Index: len(raws), Item: -1, Err: splitErr, Hint: layoutHint(data)})
	}
	if len(raws) == 0 && splitErr == nil && bytes.Contains(data, []byte("apiVersion:")) {
		errs = append(errs, &DocumentError{Item: -1,
			Err:  errors.New("the input mentions apiVersion but holds no YAML document; the manifest may be inside a comment"),
			Hint: layoutHint(data)})
	}
	warnAboutNBSP(raws, docs, nbspLines)
	return docs, errors.Join(errs...)
}

// layoutHint recognises YAML whose layout was lost in copying: several
// key-value pairs on one line (line breaks lost), or nested keys with no line
// indented (indentation lost).
func layoutHint(data []byte) string {
	lines := strings.Split(string(data), "\n")
	indented, opening := 0, 0
	for _, l := range lines {
		if strings.Contains(l, "apiVersion: ") && strings.Contains(l, " kind: ") {
			return "the manifest seems to have lost its line breaks (apiVersion and kind are on the same line), as happens when YAML is copied from some web pages; restore them"
		}
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			indented++
		}
		if strings.HasSuffix(strings.TrimRight(l, " \r"), ":") {
			opening++
		}
	}
	if indented == 0 && opening >= 2 {
		return lostIndentationHint
	}
	return ""
}

// warnAboutNBSP tells each document on which of its lines non-breaking spaces
// were read as spaces.
func warnAboutNBSP(raws []rawDocument, docs []Document, lines []int) {
	if len(lines) == 0 {
		return
	}
	for i := range docs {
		first := docs[i].Line
		end := -1 // exclusive; -1 for the end of input
		for _, r := range raws {
			if l := r.line(r.root); l > first && (end < 0 || l < end) {
				end = l
			}
		}
		var mine []int
		for _, l := range lines {
			if l >= first && (end < 0 || l < end) {
				mine = append(mine, l)
			}
		}
		if len(mine) > 0 {
			docs[i].Warnings = append(docs[i].Warnings,
				fmt.Sprintf("non-breaking spaces (U+00A0) around the text were read as spaces on lines %s", lineRanges(mine)))
		}
	}
}

// rawDocument is one parsed but not yet decoded document.
type rawDocument struct {
	root *yaml.Node
	// lineOffset is added to node lines to make them lines of the whole input
	// (JSON objects are parsed one by one).
	lineOffset int
}

func (r rawDocument) line(n *yaml.Node) int {
	if n == nil || n.Line == 0 {
		return 0
	}
	return n.Line + r.lineOffset
}

// splitDocuments parses the input into non-empty documents. JSON input (first
// non-space byte '{') may hold several concatenated objects.
func splitDocuments(data []byte) ([]rawDocument, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return splitJSON(data)
	}
	var out []rawDocument
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if root := documentRoot(&doc); root != nil {
			out = append(out, rawDocument{root: root})
		}
	}
}

func splitJSON(data []byte) ([]rawDocument, error) {
	var out []rawDocument
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := int(dec.InputOffset())
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("json: %w", err)
		}
		// Skip the whitespace before the object to find its first line.
		for start < len(data) && strings.ContainsRune(" \t\r\n", rune(data[start])) {
			start++
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return out, fmt.Errorf("json: %w", err)
		}
		if root := documentRoot(&doc); root != nil {
			out = append(out, rawDocument{root: root, lineOffset: bytes.Count(data[:start], []byte("\n"))})
		}
	}
}

// documentRoot returns the content of a document node, nil for an empty document.
func documentRoot(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := resolveAlias(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil
	}
	return root
}

func decodeDocument(index int, raw rawDocument) ([]Document, error) {
	root := raw.root
	docErr := func(item int, n *yaml.Node, err error) *DocumentError {
		kind, _ := scalarValue(mappingValue(n, "kind"))
		name, _ := scalarValue(mappingValue(mappingValue(n, "metadata"), "name"))
		return &DocumentError{Index: index, Item: item, Line: raw.line(n), Kind: kind, Name: name, Err: err}
	}
	if err := aliasProblem(root); err != nil {
		return nil, docErr(-1, root, err)
	}
	if root.Kind != yaml.MappingNode {
		return nil, docErr(-1, root, fmt.Errorf("a document must be an object with apiVersion and kind, not %s", describeNode(root)))
	}
	hint := indentationHint(root)
	apiVersion, kind, err := typeOf(root, raw)
	if err != nil {
		e := docErr(-1, root, err)
		e.Hint = hint
		return nil, e
	}
	if hint != "" {
		e := docErr(-1, root, ErrorList{{Type: ErrorTypeInvalid, Field: "metadata", Line: raw.line(mappingKey(root, "metadata")),
			Detail: "is empty, and fields that belong inside it (such as name) are at the top level"}})
		e.Hint = hint
		return nil, e
	}

	if apiVersion == "v1" && kind == "List" {
		items := resolveAlias(mappingValue(root, "items"))
		if items == nil || items.ShortTag() == "!!null" {
			return nil, nil
		}
		if items.Kind != yaml.SequenceNode {
			return nil, docErr(-1, root, ErrorList{{Type: ErrorTypeWrongType, Field: "items", Line: raw.line(items), Detail: "must be a list"}})
		}
		var docs []Document
		var errs []error
		for i, item := range items.Content {
			item = resolveAlias(item)
			if item.Kind != yaml.MappingNode {
				errs = append(errs, docErr(i, item, fmt.Errorf("a List item must be an object with apiVersion and kind, not %s", describeNode(item))))
				continue
			}
			av, k, err := typeOf(item, raw)
			if err != nil {
				errs = append(errs, docErr(i, item, err))
				continue
			}
			obj, warnings, err := decodeObject(item, av, k, raw)
			if err != nil {
				errs = append(errs, docErr(i, item, err))
				continue
			}
			docs = append(docs, Document{Index: index, Item: i, Line: raw.line(item), Object: obj, Warnings: warnings})
		}
		return docs, errors.Join(errs...)
	}

	obj, warnings, err := decodeObject(root, apiVersion, kind, raw)
	if err != nil {
		return nil, docErr(-1, root, err)
	}
	return []Document{{Index: index, Item: -1, Line: raw.line(root), Object: obj, Warnings: warnings}}, nil
}

// typeOf reads apiVersion and kind, reporting both when missing.
func typeOf(n *yaml.Node, raw rawDocument) (apiVersion, kind string, err error) {
	var errs ErrorList
	read := func(name string) string {
		v := resolveAlias(mappingValue(n, name))
		s, ok := scalarValue(v)
		switch {
		case v == nil || v.ShortTag() == "!!null" || (ok && s == ""):
			errs = append(errs, &FieldError{Type: ErrorTypeRequired, Field: name,
				Detail: "is missing; every manifest needs apiVersion and kind (for example apiVersion: placement.kubernetes-fleet.io/v1beta1, kind: ClusterResourcePlacement)"})
		case !ok || v.ShortTag() != "!!str":
			errs = append(errs, &FieldError{Type: ErrorTypeWrongType, Field: name, Line: raw.line(v), Detail: "must be a string, not " + describeNode(v)})
		}
		return s
	}
	apiVersion, kind = read("apiVersion"), read("kind")
	return apiVersion, kind, errs.ToError()
}

// kindInfo describes a typed kind: how to make one and how to normalise the
// loosely written shapes users copy from documentation.
type kindInfo struct {
	newObject func() Object
	normalise func(root *yaml.Node) []string
}

var knownKinds = map[schema.GroupVersionKind]kindInfo{
	KubeAdmiralGroupVersion.WithKind(PropagationPolicyKind):        {newObject: func() Object { return &PropagationPolicy{} }},
	KubeAdmiralGroupVersion.WithKind(ClusterPropagationPolicyKind): {newObject: func() Object { return &ClusterPropagationPolicy{} }},
}

func init() {
	for _, v := range FleetVersions {
		placement := schema.GroupVersion{Group: PlacementGroupVersion.Group, Version: v}
		knownKinds[placement.WithKind(ClusterResourcePlacementKind)] = kindInfo{newObject: func() Object { return &ClusterResourcePlacement{} }, normalise: normalisePlacement}
		knownKinds[placement.WithKind(ResourcePlacementKind)] = kindInfo{newObject: func() Object { return &ClusterResourcePlacement{} }, normalise: normalisePlacement}
		knownKinds[placement.WithKind(ClusterResourceEnvelopeKind)] = kindInfo{newObject: func() Object { return &ClusterResourceEnvelope{} }}
		knownKinds[placement.WithKind(ResourceEnvelopeKind)] = kindInfo{newObject: func() Object { return &ResourceEnvelope{} }}
		knownKinds[placement.WithKind(ClusterStagedUpdateStrategyKind)] = kindInfo{newObject: func() Object { return &ClusterStagedUpdateStrategy{} }}
		knownKinds[placement.WithKind(ClusterStagedUpdateRunKind)] = kindInfo{newObject: func() Object { return &ClusterStagedUpdateRun{} }}
		knownKinds[placement.WithKind(ClusterApprovalRequestKind)] = kindInfo{newObject: func() Object { return &ClusterApprovalRequest{} }}
		knownKinds[placement.WithKind(StagedUpdateStrategyKind)] = kindInfo{newObject: func() Object { return &ClusterStagedUpdateStrategy{} }}
		knownKinds[placement.WithKind(StagedUpdateRunKind)] = kindInfo{newObject: func() Object { return &ClusterStagedUpdateRun{} }}
		knownKinds[placement.WithKind(ApprovalRequestKind)] = kindInfo{newObject: func() Object { return &ClusterApprovalRequest{} }}
		knownKinds[placement.WithKind(ClusterResourcePlacementEvictionKind)] = kindInfo{newObject: func() Object { return &ClusterResourcePlacementEviction{} }}
		knownKinds[placement.WithKind(ClusterResourcePlacementDisruptionBudgetKind)] = kindInfo{newObject: func() Object { return &ClusterResourcePlacementDisruptionBudget{} }}
		cluster := schema.GroupVersion{Group: ClusterGroupVersion.Group, Version: v}
		knownKinds[cluster.WithKind(MemberClusterKind)] = kindInfo{newObject: func() Object { return &MemberCluster{} }}
	}
	for _, v := range OverrideVersions {
		gv := schema.GroupVersion{Group: PlacementGroupVersion.Group, Version: v}
		knownKinds[gv.WithKind(ClusterResourceOverrideKind)] = kindInfo{newObject: func() Object { return &ClusterResourceOverride{} }}
		knownKinds[gv.WithKind(ResourceOverrideKind)] = kindInfo{newObject: func() Object { return &ResourceOverride{} }}
	}
}

// reservedGroups are Fleet's own API groups: an object of these groups that
// Flotilla does not know is a mistake, never a hub resource to place.
var reservedGroups = map[string]schema.GroupVersion{
	PlacementGroupVersion.Group: PlacementGroupVersion,
	ClusterGroupVersion.Group:   ClusterGroupVersion,
}

func decodeObject(n *yaml.Node, apiVersion, kind string, raw rawDocument) (Object, []string, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, ErrorList{{Type: ErrorTypeInvalid, Field: "apiVersion", Line: raw.line(mappingValue(n, "apiVersion")),
			Detail: fmt.Sprintf("%q is not a valid group/version", apiVersion)}}
	}
	gvk := gv.WithKind(kind)
	info, known := knownKinds[gvk]
	if !known {
		if want, reserved := reservedGroups[gv.Group]; reserved {
			return nil, nil, unsupportedFleetKind(gvk, want, raw.line(mappingValue(n, "kind")))
		}
		return decodeUnstructured(n, raw)
	}

	var warnings []string
	if info.normalise != nil {
		warnings = info.normalise(n)
	}
	obj := info.newObject()
	w := &walker{line: raw.line}
	w.walk(n, reflect.TypeOf(obj).Elem(), nil)
	warnings = append(warnings, w.warnings...)
	if len(w.errs) > 0 {
		return nil, warnings, w.errs
	}
	data, err := nodeToJSON(n)
	if err != nil {
		return nil, warnings, err
	}
	if errs := strictUnmarshal(data, obj); len(errs) > 0 {
		return nil, warnings, errs
	}
	if len(w.placeholders) > 0 {
		// Every typed kind has a Placeholders field for Validate to report.
		if f := reflect.ValueOf(obj).Elem().FieldByName("Placeholders"); f.IsValid() && f.CanSet() {
			f.Set(reflect.ValueOf(w.placeholders))
		}
	}
	return obj, warnings, nil
}

func decodeUnstructured(n *yaml.Node, raw rawDocument) (Object, []string, error) {
	w := &walker{line: raw.line}
	w.walkAny(n, nil)
	if len(w.errs) > 0 {
		return nil, nil, w.errs
	}
	data, err := nodeToJSON(n)
	if err != nil {
		return nil, nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, nil, fmt.Errorf("decode manifest: %w", err)
	}
	return u, nil, nil
}

// nodeToJSON converts through YAML text with sigs.k8s.io/yaml so that scalars
// read exactly as kubectl reads them.
func nodeToJSON(n *yaml.Node) ([]byte, error) {
	text, err := yaml.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("re-encode yaml: %w", err)
	}
	data, err := sigsyaml.YAMLToJSON(text)
	if err != nil {
		return nil, fmt.Errorf("convert yaml to json: %w", err)
	}
	return data, nil
}

// strictUnmarshal decodes data into obj, turning unknown and duplicate fields
// and type mismatches into field errors. The walker catches nearly all of them
// first, with line numbers; this is the backstop.
func strictUnmarshal(data []byte, obj any) ErrorList {
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj)
	var errs ErrorList
	if err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			errs = append(errs, &FieldError{Type: ErrorTypeWrongType, Field: typeErr.Field,
				Detail: fmt.Sprintf("must be %s, not %s", describeGoType(typeErr.Type), typeErr.Value)})
		} else {
			errs = append(errs, &FieldError{Type: ErrorTypeInvalid, Detail: err.Error()})
		}
	}
	for _, se := range strictErrs {
		path := ""
		if fp, ok := se.(interface{ FieldPath() string }); ok {
			path = fp.FieldPath()
		}
		typ, detail := ErrorTypeUnknownField, "unknown field"
		if strings.HasPrefix(se.Error(), "duplicate field") {
			typ, detail = ErrorTypeDuplicate, "duplicate field"
		}
		errs = append(errs, &FieldError{Type: typ, Field: path, Detail: detail})
	}
	return errs
}

const lostIndentationHint = "the document seems to have lost its indentation (every line starts in the same column), as happens when YAML is copied from some web pages; restore the indentation"

// indentationHint recognises a document whose indentation was lost, as happens
// when YAML is copied from some web pages: metadata is empty and its fields
// follow at the top level.
func indentationHint(root *yaml.Node) string {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "metadata" {
			continue
		}
		v := root.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!null" || v.Value != "" {
			return ""
		}
		if i+2 < len(root.Content) {
			next := root.Content[i+2]
			switch next.Value {
			case "name", "namespace", "generateName", "labels", "annotations":
				if next.Column == root.Content[i].Column {
					return lostIndentationHint
				}
			}
		}
	}
	return ""
}

// Helpers on yaml nodes.

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mappingKey returns the key node of name in mapping n, or nil.
func mappingKey(n *yaml.Node, name string) *yaml.Node {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i]
		}
	}
	return nil
}

// mappingValue returns the value node of name in mapping n, or nil.
func mappingValue(n *yaml.Node, name string) *yaml.Node {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == name {
			return n.Content[i+1]
		}
	}
	return nil
}

func scalarValue(n *yaml.Node) (string, bool) {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

// describeNode names what a node holds, for messages: "a list", "the number 3".
func describeNode(n *yaml.Node) string {
	n = resolveAlias(n)
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		default:
			return fmt.Sprintf("the string %q", n.Value)
		}
	}
	return "an unsupported YAML node"
}

func describeGoType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.String()
}
