package local

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sealbench/sealbench/manifests"
)

// TestStandinCopyRacesASwap: the stand-in that runs is a private copy,
// hashed while it is copied, so the bytes run are the bytes verified. A
// writer swaps the bundle's binary (atomically and in place, mixing good
// and bad bytes) while the copy is made hundreds of times: every copy that
// is accepted holds exactly the verified bytes; every other is refused.
func TestStandinCopyRacesASwap(t *testing.T) {
	bundle := t.TempDir()
	src := StandinPath(bundle)
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	good := bytes.Repeat([]byte("the verified stand-in\n"), 1<<15)
	evil := bytes.Repeat([]byte("a swapped-in stand-in\n"), 1<<15)
	if err := os.WriteFile(src, good, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Local{o: Options{Bundle: bundle, Standin: manifests.DigestOf(good)}, bin: filepath.Join(t.TempDir(), "standin")}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := good
			if i%2 == 0 {
				data = evil
			}
			if i%4 < 2 {
				os.WriteFile(src, data, 0o755) // in place: a reader may see a mix
			} else {
				tmp := src + ".new"
				os.WriteFile(tmp, data, 0o755)
				os.Rename(tmp, src) // atomic swap
			}
		}
	}()
	accepted, refused := 0, 0
	for range 400 {
		if err := l.copyStandin(); err != nil {
			refused++
			continue
		}
		got, err := os.ReadFile(l.bin)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, good) {
			close(stop)
			wg.Wait()
			t.Fatalf("an accepted copy of the stand-in is not the verified binary (%d bytes, digest %s)", len(got), manifests.DigestOf(got))
		}
		accepted++
	}
	close(stop)
	wg.Wait()
	t.Logf("%d copies accepted (all exactly the verified bytes), %d refused", accepted, refused)
}
