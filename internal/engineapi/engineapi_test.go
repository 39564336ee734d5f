package engineapi

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestUnversioned(t *testing.T) {
	for _, c := range []struct{ in, out, err string }{
		{"/_ping", "/_ping", ""},
		{"/v1.51/containers/json", "/containers/json", ""},
		{"/v1.24/info", "/info", ""},
		{"/v1.9/info", "", "too old"}, // 1.9 < 1.24
		{"/v1.23/info", "", "too old"},
		{"/v1.52/info", "", "too new"},
		{"/v2.0", "", "too new"},
		{"/v1.51", "/", ""},
	} {
		got, err := Unversioned(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Unversioned(%q): %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.out {
			t.Errorf("Unversioned(%q) = %q, %v; want %q", c.in, got, err, c.out)
		}
	}
	if !Less("1.9", "1.24") || Less("1.24", "1.24") || !Less("1.51", "2.0") {
		t.Error("Less compares versions as text")
	}
}

func TestUnserved(t *testing.T) {
	for _, c := range []struct {
		path string
		code int
	}{{"/containers/x/pause", 501}, {"/swarm/init", 501}, {"/nothing/here", 404}, {"/", 404}} {
		w := httptest.NewRecorder()
		Unserved(w, httptest.NewRequest(http.MethodPost, c.path, nil), c.path, "this server")
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.path) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s, want %d naming the path", c.path, w.Code, w.Body, c.code)
		}
	}
}

func TestFrame(t *testing.T) {
	f := Frame(2, []byte("hello"))
	if f[0] != 2 || binary.BigEndian.Uint32(f[4:8]) != 5 || !bytes.Equal(f[8:], []byte("hello")) || !bytes.Equal(f[1:4], []byte{0, 0, 0}) {
		t.Errorf("Frame = %v", f)
	}
}
