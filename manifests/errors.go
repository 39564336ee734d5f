package manifests

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one field of a document.
type FieldError struct {
	Field   string // a JSON path such as "files[3].path"
	Message string
}

func (e FieldError) String() string { return e.Field + ": " + e.Message }

// ValidationError lists every problem Validate found in a document.
type ValidationError struct {
	Document string // what was being validated, e.g. "bundle manifest"
	Problems []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s (%d problem", e.Document, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	b.WriteString(")")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems collects FieldErrors while validating.
type problems struct {
	doc  string
	list []FieldError
}

func (p *problems) addf(field, format string, args ...any) {
	p.list = append(p.list, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &ValidationError{Document: p.doc, Problems: p.list}
}
