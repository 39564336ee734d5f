package sshx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/sealbench/sealbench/manifests"
)

// CopyFile writes the size bytes of r to dst on the host with mode perm,
// and only if they are the bytes want names: they are hashed here as they
// are sent (manifests.NewVerifyingReader) and hashed again there from the
// file as written, into a temporary file beside dst; dst appears, by a
// rename, only when both digests are want. Otherwise the temporary file is
// removed and the error says which side differed (a *manifests.MismatchError
// for the bytes read here). dst must be an absolute, clean path whose
// directory exists.
func (c *Client) CopyFile(ctx context.Context, dst string, perm fs.FileMode, r io.Reader, size int64, want manifests.Digest) error {
	if !path.IsAbs(dst) || path.Clean(dst) != dst || dst == "/" {
		return fmt.Errorf("copying to %s on %s: not an absolute, clean file path", dst, c.cfg.String())
	}
	if perm&^fs.ModePerm != 0 {
		return fmt.Errorf("copying to %s on %s: mode %s has more than permission bits", dst, c.cfg.String(), perm)
	}
	if err := want.Validate(); err != nil {
		return fmt.Errorf("copying to %s on %s: %w", dst, c.cfg.String(), err)
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := dst + ".sealbench-copy-" + hex.EncodeToString(rnd[:])
	vr := &recordingReader{r: manifests.NewVerifyingReader(r, size, want)}
	// The file is made 0600 (umask 077) and opened once for writing;
	// sha256sum then reads it back from the host's filesystem.
	out, err := c.Exec(ctx, Command{
		Argv:  []string{"sh", "-c", `umask 077 && cat > "$1" && sha256sum < "$1"`, "sealbench-copy", tmp},
		Stdin: vr,
		Name:  "copy-" + path.Base(dst),
	})
	if rerr := vr.Err(); rerr != nil {
		c.removeQuietly(ctx, tmp)
		return fmt.Errorf("copying to %s on %s: the bytes read here are not the manifest's: %w", dst, c.cfg.String(), rerr)
	}
	if err != nil {
		c.removeQuietly(ctx, tmp)
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	got, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if got != want.Hex {
		c.removeQuietly(ctx, tmp)
		return fmt.Errorf("copying to %s on %s: %w", dst, c.cfg.String(),
			&manifests.MismatchError{Field: "digest of the file as written there", Want: want.String(), Got: "sha256:" + got})
	}
	if _, err := c.Exec(ctx, Command{
		Argv: []string{"sh", "-c", `chmod "$1" "$2" && mv -f "$2" "$3"`, "sealbench-copy", fmt.Sprintf("%04o", uint32(perm)), tmp, dst},
		Name: "place-" + path.Base(dst),
	}); err != nil {
		c.removeQuietly(ctx, tmp)
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	return nil
}

// removeQuietly removes a temporary file on the host, as far as it can;
// what it cannot is in the run's directory there, which teardown removes.
func (c *Client) removeQuietly(ctx context.Context, p string) {
	if c.alive() != nil {
		return
	}
	if _, err := c.Exec(context.WithoutCancel(ctx), Command{Argv: []string{"rm", "-f", "--", p}, Name: "rm-copy"}); err != nil {
		c.cfg.Log("ssh %s: %v", c.cfg.String(), err)
	}
}

// recordingReader keeps the first error other than io.EOF its reader
// returned: the session's copy of stdin does not say why it stopped.
type recordingReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	return n, err
}

// Err is the reader's first error other than io.EOF.
func (r *recordingReader) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// FetchFile reads src on the host, hashed there (sha256sum, before it is
// sent) and here (as received): the bytes are returned only when both
// digests agree. A src that is not there is (nil, false, nil).
func (c *Client) FetchFile(ctx context.Context, src string) ([]byte, bool, error) {
	if !path.IsAbs(src) || path.Clean(src) != src {
		return nil, false, fmt.Errorf("fetching %s from %s: not an absolute, clean file path", src, c.cfg.String())
	}
	out, err := c.Exec(ctx, Command{Argv: []string{"sh", "-c", `if [ -f "$1" ]; then sha256sum < "$1"; fi`, "sealbench-fetch", src}, Name: "hash-" + path.Base(src)})
	if err != nil {
		return nil, false, fmt.Errorf("fetching %s: %w", src, err)
	}
	there, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if there == "" {
		return nil, false, nil
	}
	b, err := c.Exec(ctx, Command{Argv: []string{"cat", "--", src}, Name: "fetch-" + path.Base(src)})
	if err != nil {
		return nil, false, fmt.Errorf("fetching %s: %w", src, err)
	}
	if here := manifests.DigestOf(b); here.Hex != there {
		return nil, false, fmt.Errorf("fetching %s from %s: %w", src, c.cfg.String(),
			&manifests.MismatchError{Field: "digest of the bytes received here", Want: "sha256:" + there, Got: here.String()})
	}
	return b, true, nil
}
