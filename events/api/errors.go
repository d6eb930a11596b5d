package api

import (
	"fmt"
	"strings"
)

// ErrorType classifies a FieldError.
type ErrorType string

const (
	// ErrorTypeRequired: a required value is missing.
	ErrorTypeRequired ErrorType = "Required"
	// ErrorTypeInvalid: the value is malformed or out of range.
	ErrorTypeInvalid ErrorType = "Invalid"
	// ErrorTypeNotSupported: the value is not one of the allowed ones.
	ErrorTypeNotSupported ErrorType = "NotSupported"
	// ErrorTypeForbidden: the field may not be set in this context.
	ErrorTypeForbidden ErrorType = "Forbidden"
	// ErrorTypeDuplicate: the value or key appears twice.
	ErrorTypeDuplicate ErrorType = "Duplicate"
	// ErrorTypeTooMany: the list has too many entries.
	ErrorTypeTooMany ErrorType = "TooMany"
	// ErrorTypeUnknownField: the field does not exist in the schema.
	ErrorTypeUnknownField ErrorType = "UnknownField"
	// ErrorTypeWrongType: the value has the wrong shape (object, list, string, ...).
	ErrorTypeWrongType ErrorType = "WrongType"
	// ErrorTypePlaceholder: the document holds a documentation placeholder ("...").
	ErrorTypePlaceholder ErrorType = "Placeholder"
	// ErrorTypeImmutable: the field may not change on update.
	ErrorTypeImmutable ErrorType = "Immutable"
)

// FieldError is one problem at one field path, in words a user understands.
type FieldError struct {
	Type ErrorType
	// Field is the path, e.g. spec.policy.numberOfClusters or
	// spec.resourceSelectors[0].name; map keys appear in brackets.
	Field string
	// Detail is the sentence that follows the path.
	Detail string
	// Line is the 1-based line in the input where the field is, when known.
	Line int
}

// Error renders "path: detail", with the line when known.
func (e *FieldError) Error() string {
	s := e.Detail
	if e.Field != "" {
		s = e.Field + ": " + e.Detail
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// ErrorList is every problem found in one object.
type ErrorList []*FieldError

// Error joins the problems, one per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// ToError returns nil for an empty list and the list otherwise, so that an empty
// list never becomes a non-nil error.
func (l ErrorList) ToError() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Fields returns the "path: detail" strings without line numbers, handy for
// comparing in tests and for printing.
func (l ErrorList) Fields() []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Field + ": " + e.Detail
	}
	return out
}

// DocumentError is a document of a YAML or JSON stream that could not be decoded.
type DocumentError struct {
	// Index is the 0-based position of the document in the stream (empty
	// documents are not counted). The message counts from 1.
	Index int
	// Item is the position inside a v1 List document, or -1.
	Item int
	// Line is the 1-based line where the document starts, 0 when unknown.
	Line int
	// Kind and Name identify the object when they could be read.
	Kind, Name string
	// Hint is an extra sentence for the user, e.g. that indentation seems lost.
	Hint string
	// Err is the cause; an ErrorList when the problems are at field paths.
	Err error
}

func (e *DocumentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "document %d", e.Index+1)
	if e.Item >= 0 {
		fmt.Fprintf(&b, ", items[%d]", e.Item)
	}
	b.WriteString(Whereabouts(e.Kind, e.Name, e.Line, "starting at line"))
	b.WriteString(": ")
	if list, ok := e.Err.(ErrorList); ok && len(list) > 1 {
		b.WriteString(fmt.Sprintf("%d problems:\n  ", len(list)))
		b.WriteString(strings.ReplaceAll(list.Error(), "\n", "\n  "))
	} else {
		b.WriteString(e.Err.Error())
	}
	if e.Hint != "" {
		b.WriteString("\n  hint: " + e.Hint)
	}
	return b.String()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// Whereabouts says which object a problem is in and where it starts, as " (Kind name,
// <lineWord> N)", or "" when nothing is known.
func Whereabouts(kind, name string, line int, lineWord string) string {
	var where []string
	if kind != "" {
		w := kind
		if name != "" {
			w += " " + name
		}
		where = append(where, w)
	}
	if line > 0 {
		where = append(where, fmt.Sprintf("%s %d", lineWord, line))
	}
	if len(where) == 0 {
		return ""
	}
	return " (" + strings.Join(where, ", ") + ")"
}
