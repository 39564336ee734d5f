//go:build linux

package standin

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sealbench/sealbench/internal/testenv"
)

// unpackInto unpacks entries into a fresh layer directory beside an
// "outside" directory, and fails the test if anything appears outside.
func unpackInto(t *testing.T, es []entry) (string, error) {
	t.Helper()
	layer, err := layerTarErr(es)
	if err != nil {
		return "", err // not a tar at all: nothing to unpack
	}
	base := t.TempDir()
	dst, outside := filepath.Join(base, "layer"), filepath.Join(base, "outside")
	os.Mkdir(dst, 0o755)
	os.Mkdir(outside, 0o755)
	_, err = unpackLayer(bytes.NewReader(layer), dst)
	ents, _ := os.ReadDir(base)
	if len(ents) != 2 {
		t.Errorf("unpacking wrote beside the layer: %v", ents)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("unpacking wrote outside the layer: %v", ents)
	}
	return dst, err
}

func TestUnpackLayer(t *testing.T) {
	testenv.NeedRoot(t) // chown to the entries' owners
	dst, err := unpackInto(t, []entry{
		{name: "./a/b/c", body: "deep"}, // parents created
		{name: "f", body: "first"},
		{name: "f", body: "second"}, // a later entry replaces an earlier one
		{name: "d/", typ: tar.TypeDir},
		{name: "d/x", body: "x"},
		{name: "d", body: "now a file"}, // a file replaces a directory
		{name: "hl", typ: tar.TypeLink, link: "a/b/c"},
		{name: "abs", typ: tar.TypeSymlink, link: "/etc/passwd"}, // absolute: resolved in the Sandbox, never here
		{name: "rel", typ: tar.TypeSymlink, link: "a/../f"},
		{name: "owned", body: "o", uid: 1234, gid: 5678, mode: 0o4750},
		{name: "fifo", typ: tar.TypeFifo},
		{name: "null", typ: tar.TypeChar}, // skipped
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"a/b/c": "deep", "f": "second", "d": "now a file", "hl": "deep"} {
		if b, err := os.ReadFile(filepath.Join(dst, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	var st unix.Stat_t
	unix.Lstat(filepath.Join(dst, "owned"), &st)
	if st.Uid != 1234 || st.Gid != 5678 || st.Mode&0o7777 != 0o4750 {
		t.Errorf("owned: uid %d gid %d mode %o", st.Uid, st.Gid, st.Mode&0o7777)
	}
	if l, _ := os.Readlink(filepath.Join(dst, "abs")); l != "/etc/passwd" {
		t.Errorf("abs -> %q", l)
	}
	if _, err := os.Lstat(filepath.Join(dst, "null")); !os.IsNotExist(err) {
		t.Errorf("a device node was created: %v", err)
	}
}

// FuzzUnpackLayer: whatever the entries, nothing is written outside the
// layer directory. The input is decoded into entries over a small alphabet
// of names and link targets chosen to climb, jump and loop.
func FuzzUnpackLayer(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 9, 2, 0, 7, 1, 4, 4, 4, 8, 2, 6})
	f.Add([]byte("\x02\x05\x01\x00\x06\x03\x07\x09\x02"))
	parts := []string{"a", "b", "..", ".", "", "/", "outside", ".wh.a", ".wh..wh..opq", "link"}
	targets := []string{"/", "..", "../..", "../outside", "a", "/etc", "link", "a/../..", "b/c", "../../../outside/x"}
	types := []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeReg, tar.TypeFifo}
	f.Fuzz(func(t *testing.T, in []byte) {
		testenv.NeedRoot(t) // entries carry owners
		var es []entry
		for len(in) >= 4 && len(es) < 16 {
			n := 1 + int(in[0])%3
			var comps []string
			for i := 0; i < n && 1+i < len(in); i++ {
				comps = append(comps, parts[int(in[1+i])%len(parts)])
			}
			e := entry{name: strings.Join(comps, "/"), typ: types[int(in[len(in)-1])%len(types)], body: "x"}
			e.link = targets[int(in[len(in)-2])%len(targets)]
			if e.name == "" {
				e.name = "a"
			}
			es = append(es, e)
			in = in[min(len(in), 1+n):]
		}
		unpackInto(t, es) // errors are fine; writing outside is not
	})
}
