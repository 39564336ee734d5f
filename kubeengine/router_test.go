package kubeengine

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/engineapi"
)

// TestServedThroughTheRouter holds what the kube-engine's answers owe to
// engineapi.Router, with no cluster: its name in the headers and in a
// 501, the bound on a create's body, and its own errors in the error
// shape (a load with no containerd to load into).
func TestServedThroughTheRouter(t *testing.T) {
	s := newServer(Config{Namespace: "ns", Node: "n1", FUSEResource: "f", RunID: "r"}, nil, nil)
	big := httptest.NewRequest(http.MethodPost, "/v1.51/containers/create?name=big", strings.NewReader(""))
	big.ContentLength = 300 << 20 // declared: refused before a byte is read
	for _, c := range []struct {
		req     *http.Request
		code    int
		message string
	}{
		{httptest.NewRequest(http.MethodGet, "/_ping", nil), 200, ""},
		{httptest.NewRequest(http.MethodPost, "/v1.51/containers/abc/stop", nil), 501, "sealbench kube-engine does not implement POST /containers/abc/stop"},
		{httptest.NewRequest(http.MethodGet, "/containers/json", nil), 501, "sealbench kube-engine does not implement GET /containers/json"},
		{big, 413, "request body too large"},
		{httptest.NewRequest(http.MethodPost, "/images/load", strings.NewReader("tar")), 501, "reaches no containerd"},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, c.req)
		if w.Code != c.code || !strings.HasPrefix(w.Header().Get("Server"), "sealbench-kube-engine/") || w.Header().Get("Api-Version") != engineapi.APIVersion {
			t.Errorf("%s %s: %d %v, want %d from the kube-engine", c.req.Method, c.req.URL.Path, w.Code, w.Header(), c.code)
		}
		if c.message == "" {
			continue
		}
		var e struct{ Message string }
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Message, c.message) {
			t.Errorf("%s %s: %s, want a message saying %q", c.req.Method, c.req.URL.Path, w.Body, c.message)
		}
	}
}

// TestChunkedCreateIsBounded sends the kube-engine a 300 MB container
// create, chunked (no declared length) and made as it is read: it is
// refused with 413 without the server holding it (what this process
// allocates meanwhile stays far below its size).
func TestChunkedCreateIsBounded(t *testing.T) {
	s := newServer(Config{Namespace: "ns", Node: "n1", FUSEResource: "f", RunID: "r"}, nil, nil)
	const size = 300 << 20
	body := io.MultiReader(strings.NewReader(`{"Image":"x","Labels":{"a":"`), io.LimitReader(endless('a'), size))
	req := httptest.NewRequest(http.MethodPost, "/v1.51/containers/create?name=big", body)
	req.ContentLength = -1
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	runtime.ReadMemStats(&after)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "request body too large") {
		t.Errorf("a chunked %d MiB create: %d %s, want 413", size>>20, w.Code, w.Body)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("%d MiB allocated while refusing a %d MiB create", grew>>20, size>>20)
	}
}

// endless reads as an endless run of its byte.
type endless byte

func (b endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
