//go:build linux

package standin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/testenv"
)

// FuzzEngineAPIRequests sends arbitrary bodies to the endpoints that decode
// a client's JSON (container create, exec create, exec start) and arbitrary
// paths and query strings to the router, through the real handler with no
// image loaded. It must never panic, must always answer, and every error
// must be in the Engine API's shape: {"message": "..."}.
func FuzzEngineAPIRequests(f *testing.F) {
	testenv.NeedRoot(f)
	srv, err := New(Options{StateDir: f.TempDir(), Logf: func(string, ...any) {}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	f.Add("/containers/create", `{"Image":"x","Cmd":["sh"],"HostConfig":{"NetworkMode":"none"}}`)
	f.Add("/v1.41/containers/create?name=a", `{"Image":"x","HostConfig":{"Binds":["/:/host"],"Devices":[{"PathOnHost":"/dev/fuse"}]}}`)
	f.Add("/containers/abc/exec", `{"Cmd":["true"],"AttachStdout":true}`)
	f.Add("/exec/abc/start", `{"Detach":false,"Tty":false}`)
	f.Add("/containers/json?filters=%7B%22label%22%3A%5B%22a%22%5D%7D", ``)
	f.Add("/v9.99/_ping", ``)
	f.Fuzz(func(t *testing.T, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n#") {
			return
		}
		req, err := http.NewRequest(http.MethodPost, "http://standin"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 400 {
			var e struct {
				Message *string `json:"message"`
			}
			if err := json.Unmarshal(bytes.TrimSpace(rec.Body.Bytes()), &e); err != nil || e.Message == nil {
				t.Fatalf("POST %s answered %d with %q: not the Engine API's error shape", path, rec.Code, rec.Body.String())
			}
		}
	})
}
