// Package input reads the files given to fleetctl apply and delete, decodes
// every document in them and checks it, reporting each problem with its file,
// document and field path.
package input

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Stdin is the path that stands for standard input, as in kubectl.
const Stdin = "-"

// Source is one input: a file or standard input.
type Source struct {
	// Name is the path as fleetctl shows it, or "<stdin>".
	Name string
	Data []byte
}

// extensions are the file types read from a directory, as kubectl does.
var extensions = []string{".yaml", ".yml", ".json"}

// Read expands paths into sources. A file is read whatever its name; a
// directory contributes its .yaml, .yml and .json files in lexical order, and
// those of its subdirectories when recursive is set; "-" reads stdin, once.
func Read(paths []string, recursive bool, stdin io.Reader) ([]Source, error) {
	var out []Source
	readStdin := false
	for _, p := range paths {
		if p == Stdin {
			if readStdin {
				return nil, errors.New("standard input (-) can be given only once")
			}
			readStdin = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read standard input: %w", err)
			}
			out = append(out, Source{Name: "<stdin>", Data: data})
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, unwrapPathError(err))
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, unwrapPathError(err))
			}
			out = append(out, Source{Name: p, Data: data})
			continue
		}
		files, err := dirFiles(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", f, unwrapPathError(err))
			}
			out = append(out, Source{Name: f, Data: data})
		}
	}
	return out, nil
}

func dirFiles(dir string, recursive bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && !recursive {
				return fs.SkipDir
			}
			return nil
		}
		if slices.Contains(extensions, strings.ToLower(filepath.Ext(path))) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", dir, unwrapPathError(err))
	}
	slices.Sort(files)
	return files, nil
}

// unwrapPathError drops the path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Document is one object decoded from a source.
type Document struct {
	// Source names the file it came from.
	Source string
	api.Document
}

// Where names the document for messages: "web.yaml: document 2" (counting
// from 1), with the List item when there is one.
func (d Document) Where() string {
	return where(d.Source, d.Index, d.Item)
}

func where(source string, index, item int) string {
	s := fmt.Sprintf("%s: document %d", source, index+1)
	if item >= 0 {
		s += fmt.Sprintf(", items[%d]", item)
	}
	return s
}

// Problem is one thing wrong with one document, at a field path when it has one.
type Problem struct {
	Source string
	// Index is the 0-based position of the document in its source; Item the
	// position in a List document, or -1.
	Index, Item int
	// Line is the 1-based line where the document starts, 0 when unknown.
	Line int
	// Kind and Name identify the object when they could be read.
	Kind, Name string
	// Field is the path, e.g. spec.policy.numberOfClusters; empty when the
	// problem is about the whole document.
	Field string
	// FieldLine is the line of the field, 0 when unknown.
	FieldLine int
	Detail    string
	// Hint is an extra sentence, e.g. that the indentation seems lost.
	Hint string
}

// String renders the problem on one line (plus an indented hint line):
//
//	crp.yaml: document 1 (ClusterResourcePlacement web, line 1): spec.policy.numberOfClusters: required when placementType is PickN (line 9)
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(where(p.Source, p.Index, p.Item))
	b.WriteString(api.Whereabouts(p.Kind, p.Name, p.Line, "line"))
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Detail)
	if p.FieldLine > 0 {
		fmt.Fprintf(&b, " (line %d)", p.FieldLine)
	}
	if p.Hint != "" {
		b.WriteString("\n  hint: " + p.Hint)
	}
	return b.String()
}

// ProblemsAt turns field errors found in doc into problems.
func ProblemsAt(doc Document, errs api.ErrorList) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem{
			Source: doc.Source, Index: doc.Index, Item: doc.Item, Line: doc.Line,
			Kind: doc.Object.GetObjectKind().GroupVersionKind().Kind, Name: doc.Object.GetName(),
			Field: e.Field, FieldLine: e.Line, Detail: e.Detail,
		})
	}
	return out
}

// Decode decodes every document of every source. It returns the documents
// that decoded and one problem per decoding error.
func Decode(sources []Source) ([]Document, []Problem) {
	var docs []Document
	var problems []Problem
	for _, src := range sources {
		decoded, err := api.DecodeAll(strings.NewReader(string(src.Data)))
		for _, d := range decoded {
			docs = append(docs, Document{Source: src.Name, Document: d})
		}
		problems = append(problems, decodeProblems(src.Name, err)...)
	}
	return docs, problems
}

// Load decodes every document of every source, fills in the API defaults of
// placements and member clusters, and validates every object. It returns the
// documents and every problem found, in input order; the documents are fit to
// publish only when there are no problems.
func Load(sources []Source) ([]Document, []Problem) {
	return LoadIn(sources, "")
}

// LoadIn is Load with a default namespace, which a ResourceOverride or a
// ResourcePlacement that names none is given before it is validated, as kubectl gives its context's
// namespace; "" leaves it without one.
func LoadIn(sources []Source, namespace string) ([]Document, []Problem) {
	docs, problems := Decode(sources)
	for _, d := range docs {
		switch o := d.Object.(type) {
		case *api.ResourceOverride:
			if o.Namespace == "" {
				o.Namespace = namespace
			}
		case *api.ClusterResourcePlacement:
			if o.Kind == api.ResourcePlacementKind && o.Namespace == "" {
				o.Namespace = namespace
			}
		case *api.ClusterStagedUpdateStrategy, *api.ClusterStagedUpdateRun, *api.ClusterApprovalRequest:
			if api.ClusterStagedKind(o.GetObjectKind().GroupVersionKind().Kind) != "" && o.GetNamespace() == "" {
				o.SetNamespace(namespace)
			}
		}
		// Defaults first, as the API server would: the published object is
		// the complete one, and Validate accepts either form.
		api.Default(d.Object)
		problems = append(problems, ProblemsAt(d, api.Validate(d.Object))...)
	}
	SortProblems(problems)
	return docs, problems
}

// WithoutProblems returns the documents that have no problem in problems.
func WithoutProblems(docs []Document, problems []Problem) []Document {
	type key struct {
		source      string
		index, item int
	}
	bad := map[key]bool{}
	for _, p := range problems {
		bad[key{p.Source, p.Index, p.Item}] = true
	}
	var out []Document
	for _, d := range docs {
		if !bad[key{d.Source, d.Index, d.Item}] {
			out = append(out, d)
		}
	}
	return out
}

// SortProblems orders problems by source in input order, then by document,
// keeping the order within a document.
func SortProblems(ps []Problem) {
	order := map[string]int{}
	for _, p := range ps {
		if _, ok := order[p.Source]; !ok {
			order[p.Source] = len(order)
		}
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if c := order[a.Source] - order[b.Source]; c != 0 {
			return c
		}
		if c := a.Index - b.Index; c != 0 {
			return c
		}
		return a.Item - b.Item
	})
}

// decodeProblems flattens the joined *api.DocumentError values DecodeAll returns.
func decodeProblems(source string, err error) []Problem {
	if err == nil {
		return nil
	}
	var errs []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []Problem
	for _, e := range errs {
		var de *api.DocumentError
		if !errors.As(e, &de) {
			out = append(out, Problem{Source: source, Item: -1, Detail: e.Error()})
			continue
		}
		base := Problem{Source: source, Index: de.Index, Item: de.Item, Line: de.Line, Kind: de.Kind, Name: de.Name}
		var list api.ErrorList
		if !errors.As(de.Err, &list) || len(list) == 0 {
			p := base
			p.Detail, p.Hint = de.Err.Error(), de.Hint
			out = append(out, p)
			continue
		}
		for i, fe := range list {
			p := base
			p.Field, p.FieldLine, p.Detail = fe.Field, fe.Line, fe.Detail
			if i == len(list)-1 {
				p.Hint = de.Hint
			}
			out = append(out, p)
		}
	}
	return out
}
