package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// errTornLine is what readLine returns for a last line with no newline:
// the writer stopped in the middle of it. Each format says what that means.
var errTornLine = errors.New("torn last line")

// readLine returns the next line of a JSONL file without its newline,
// io.EOF at a clean end, errTornLine for a last line with no newline, and
// an error for a line longer than max.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max+1 || (err != nil && len(line) > max) {
			return nil, fmt.Errorf("line is longer than %d bytes", max)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errTornLine
		default:
			return nil, fmt.Errorf("reading: %w", err)
		}
	}
}

// decodeLine decodes one JSONL line strictly into v: not blank, carrying
// "formatVersion" equal to version (checked first, so a newer file is told
// apart from a broken one), no unknown fields, one JSON value. what names
// the record in errors ("sample", "ledger entry").
func decodeLine(b []byte, what string, version int, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return fmt.Errorf("blank line: every line is one %s", what)
	}
	var head struct {
		FormatVersion *int `json:"formatVersion"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return fmt.Errorf("parsing %s: %w", what, err)
	}
	switch {
	case head.FormatVersion == nil:
		return fmt.Errorf("no formatVersion: not a sealbench %s", what)
	case *head.FormatVersion != version:
		return fmt.Errorf("format version %d; this sealbench reads version %d", *head.FormatVersion, version)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parsing %s: %w", what, err)
	}
	if dec.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}
