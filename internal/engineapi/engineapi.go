// Package engineapi is what the Engine API servers of sealbench share
// (the stand-in, standin/, and kube-engine, kubeengine/): the Router,
// which routes every call to a Backend (each server is one), with the
// version prefix, the bound on request bodies and the error shape handled
// once; the errors a Backend returns to choose a status; the hijacked
// stream and its stdcopy frames. The standard library only: the stand-in
// is one of the bundle's binaries.
package engineapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// The Engine API versions the servers speak: the official client they
// are tested with (github.com/docker/docker v28.5) speaks APIVersion, and
// clients negotiate down to the lower of theirs and this.
const (
	APIVersion    = "1.51"
	MinAPIVersion = "1.24"
)

var versionPrefix = regexp.MustCompile(`^/v([0-9]+)\.([0-9]+)(/|$)`)

// Less says whether API version a is older than b ("1.24" < "1.51").
func Less(a, b string) bool {
	am, an, _ := strings.Cut(a, ".")
	bm, bn, _ := strings.Cut(b, ".")
	x, _ := strconv.Atoi(am)
	y, _ := strconv.Atoi(bm)
	if x != y {
		return x < y
	}
	x, _ = strconv.Atoi(an)
	y, _ = strconv.Atoi(bn)
	return x < y
}

// Unversioned is p without its /vX.Y prefix, if any; the error, in
// dockerd's words, says when X.Y is not one the servers speak.
func Unversioned(p string) (string, error) {
	m := versionPrefix.FindStringSubmatch(p)
	if m == nil {
		return p, nil
	}
	v := m[1] + "." + m[2]
	if Less(v, MinAPIVersion) {
		return p, fmt.Errorf("client version %s is too old. Minimum supported API version is %s, please upgrade your client to a newer version", v, MinAPIVersion)
	}
	if Less(APIVersion, v) {
		return p, fmt.Errorf("client version %s is too new. Maximum supported API version is %s", v, APIVersion)
	}
	return "/" + strings.TrimPrefix(p[len(m[0]):], "/"), nil
}

// knownArea lists the Engine API's top-level paths.
var knownArea = map[string]bool{
	"_ping": true, "version": true, "info": true, "events": true, "system": true, "auth": true,
	"images": true, "containers": true, "exec": true, "build": true, "commit": true,
	"networks": true, "volumes": true, "plugins": true, "swarm": true, "nodes": true,
	"services": true, "tasks": true, "secrets": true, "configs": true, "distribution": true,
	"session": true, "grpc": true,
}

// Unserved answers a request a server does not serve: 501 naming the
// call (server is who says so) where the path is the Engine API's, 404
// elsewhere.
func Unserved(w http.ResponseWriter, r *http.Request, path, server string) {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if knownArea[seg] {
		WriteError(w, http.StatusNotImplemented, fmt.Sprintf("%s does not implement %s %s", server, r.Method, path))
		return
	}
	WriteError(w, http.StatusNotFound, fmt.Sprintf("page not found: %s %s", r.Method, path))
}

// The errors a Backend wraps to choose the status of its answer (Fail).
var (
	ErrNotFound       = errors.New("not found")       // 404
	ErrConflict       = errors.New("conflict")        // 409
	ErrBadInput       = errors.New("bad input")       // 400
	ErrNotImplemented = errors.New("not implemented") // 501
	// ErrTooLarge says a request's body is longer than MaxJSONBody (413).
	ErrTooLarge = errors.New("request body too large")
)

// Fail answers err in the Engine API's error shape, with the status of
// the first of ErrTooLarge (or an *http.MaxBytesError), ErrNotFound,
// ErrConflict, ErrBadInput and ErrNotImplemented it wraps, 500 for none.
// The message is err's, without those sentinels' own words, as dockerd
// words it ("No such container: x", not "not found: No such container: x").
func Fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, ErrTooLarge), errors.As(err, &tooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		code = http.StatusConflict
	case errors.Is(err, ErrBadInput):
		code = http.StatusBadRequest
	case errors.Is(err, ErrNotImplemented):
		code = http.StatusNotImplemented
	}
	msg := err.Error()
	for _, e := range []error{ErrNotFound, ErrConflict, ErrBadInput, ErrNotImplemented} {
		msg = strings.ReplaceAll(msg, e.Error()+": ", "")
	}
	WriteError(w, code, msg)
}

// DecodeJSON decodes a request's JSON body into v. A body that is not
// JSON of v's shape wraps ErrBadInput (and the decoder's error, io.EOF
// for an empty one); one longer than the Router lets through, ErrTooLarge.
func DecodeJSON(body io.Reader, v any) error {
	err := json.NewDecoder(body).Decode(v)
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return fmt.Errorf("%w: more than %d MiB of JSON", ErrTooLarge, tooLarge.Limit>>20)
	}
	return fmt.Errorf("%w: %w", ErrBadInput, err)
}

// WriteError answers in the Engine API's error shape.
func WriteError(w http.ResponseWriter, code int, msg string) {
	WriteJSON(w, code, map[string]string{"message": msg})
}

// WriteJSON answers v as JSON with code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// Frame is one stdcopy frame of p: stream 1 is stdout, 2 stderr.
func Frame(stream byte, p []byte) []byte {
	b := make([]byte, 8+len(p))
	b[0] = stream
	b[4], b[5], b[6], b[7] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
	copy(b[8:], p)
	return b
}

// Hijack takes over the connection for a raw stream of contentType,
// answering 101 when the client asked for an upgrade (the official client
// always does), 200 otherwise.
func Hijack(w http.ResponseWriter, r *http.Request, contentType string) (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("hijacking the connection: %w", err)
	}
	if r.Header.Get("Upgrade") != "" {
		fmt.Fprintf(rw, "HTTP/1.1 101 UPGRADED\r\nContent-Type: %s\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nApi-Version: %s\r\n\r\n", contentType, APIVersion)
	} else {
		fmt.Fprintf(rw, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nApi-Version: %s\r\n\r\n", contentType, APIVersion)
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, rw, nil
}
