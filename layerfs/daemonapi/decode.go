package daemonapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The Decode functions read what one layerfsd command printed with --json.
// They refuse anything layerfsd would not print: empty output, malformed
// JSON, fields this package does not know (a daemon from another build),
// trailing data, and documents missing what every answer carries. When the
// output is layerfsd's failure document they return it as an *Error.

// DecodeInit reads `layerfsd init --json`.
func DecodeInit(b []byte) (*InitResult, error) {
	return decode("init", b, func(r *InitResult) error {
		if r.Store == "" {
			return errors.New("no store")
		}
		_, err := ParseProfile(string(r.Profile))
		return err
	})
}

// DecodeLayer reads `layerfsd import --json` or `layerfsd show --json`.
func DecodeLayer(b []byte) (*Layer, error) {
	return decode("layer", b, func(l *Layer) error { return l.check() })
}

// DecodeReady reads `layerfsd mount --json`.
func DecodeReady(b []byte) (*ReadyInfo, error) {
	return decode("mount", b, func(r *ReadyInfo) error {
		switch {
		case r.PID <= 0:
			return fmt.Errorf("pid %d", r.PID)
		case r.Store == "" || r.Workspace == "" || r.Control == "":
			return errors.New("store, workspace or control missing")
		case r.Layer != "" && !isID(r.Layer):
			return fmt.Errorf("layer id %q is not 64 hex digits", r.Layer)
		}
		return r.Features.checkTransport()
	})
}

// DecodeStats reads `layerfsd stats --json`.
func DecodeStats(b []byte) (*Stats, error) {
	return decode("stats", b, func(s *Stats) error {
		switch {
		case s.Mountpoint == "" || s.Store == "":
			return errors.New("mountpoint or store missing")
		case s.Requests == nil:
			return errors.New("no requests")
		}
		return s.Features.checkTransport()
	})
}

// DecodeCommit reads `layerfsd commit --json`.
func DecodeCommit(b []byte) (*CommitResult, error) {
	return decode("commit", b, func(r *CommitResult) error { return r.Layer.check() })
}

// DecodeUnmount reads `layerfsd unmount --json`.
func DecodeUnmount(b []byte) (*UnmountResult, error) {
	return decode("unmount", b, func(r *UnmountResult) error {
		if r.DurationNs < 0 || r.CleanupNs < 0 {
			return fmt.Errorf("negative duration")
		}
		return nil
	})
}

// checkTransport insists on a transport: every mount has one.
func (f *Features) checkTransport() error {
	switch f.Transport {
	case TransportURing, TransportDev:
		return nil
	}
	return fmt.Errorf("transport %q (want %s or %s)", f.Transport, TransportURing, TransportDev)
}

func (l *Layer) check() error {
	switch {
	case !isID(l.ID):
		return fmt.Errorf("layer id %q is not 64 hex digits", l.ID)
	case l.Parent != "" && !isID(l.Parent):
		return fmt.Errorf("parent id %q is not 64 hex digits", l.Parent)
	case !isID(l.Tree):
		return fmt.Errorf("tree %q is not 64 hex digits", l.Tree)
	}
	return nil
}

// isID reports whether s is 64 lower-case hex digits, as layerfsd writes
// Layer ids and digests.
func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decode reads exactly one JSON document of type T from b, strictly, and
// checks it with valid.
func decode[T any](what string, b []byte, valid func(*T) error) (*T, error) {
	fail := func(err error) error {
		return fmt.Errorf("reading layerfsd's %s answer %q: %w", what, clip(b), err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fail(errors.New("layerfsd printed nothing"))
	}
	var e struct {
		Error    *string `json:"error"`
		ExitCode int     `json:"exitCode"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		return nil, &Error{Message: *e.Error, ExitCode: e.ExitCode}
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fail(errors.New("trailing data after the JSON document"))
	}
	if err := valid(&v); err != nil {
		return nil, fail(err)
	}
	return &v, nil
}

// clip shortens what goes into an error message.
func clip(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
