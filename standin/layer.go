//go:build linux

package standin

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafeLayer marks a layer entry that would write outside the layer's
// directory: an absolute name, a ".." component, a path through a symlink,
// or a link whose target leaves the layer.
var ErrUnsafeLayer = errors.New("unsafe layer entry")

// Overlayfs spellings of the OCI whiteouts: a 0/0 character device hides a
// lower entry, the opaque xattr hides a lower directory's contents.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
	opaqueXattr    = "trusted.overlay.opaque"
)

// beneath resolves inside the layer directory only, never through a
// symlink or a magic link: the kernel enforces it, so a crafted tar cannot
// make the extractor write anywhere else.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// layerStats counts what an extraction did.
type layerStats struct {
	Entries        int
	Bytes          int64
	SkippedDevices int // character and block devices are not created (see unpackLayer)
}

// entryName cleans a layer entry's name to a relative path, or rejects it.
func entryName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %q is an absolute path", ErrUnsafeLayer, name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("%w: %q has a \"..\" component", ErrUnsafeLayer, name)
		}
	}
	return path.Clean(name), nil
}

// unpackLayer extracts the uncompressed layer tar r into dir, which must
// exist and be empty. Whiteouts become their overlayfs forms. Nothing is
// written outside dir: names are checked, and every parent directory is
// opened with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS. Symlinks are created but
// never followed; a relative symlink that climbs above the layer root, and a
// hard link to anything outside the layer, are rejected. Character and block
// devices are skipped: a Sandbox gets its devices from the stand-in, never
// from an image, and its root is mounted nodev anyway. Extended attributes
// (file capabilities included) are not applied.
func unpackLayer(r io.Reader, dir string) (layerStats, error) {
	var st layerStats
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, fmt.Errorf("opening layer directory %q: %w", dir, err)
	}
	defer unix.Close(root)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			if errors.Is(err, ErrBadInput) {
				return st, err // a digest or size mismatch found by the verifying reader
			}
			return st, fmt.Errorf("%w: reading layer tar: %v", ErrBadInput, err)
		}
		st.Entries++
		if err := unpackEntry(root, hdr, tr, &st); err != nil {
			return st, fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
}

func unpackEntry(root int, hdr *tar.Header, r io.Reader, st *layerStats) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		return nil // the layer root itself
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	parent, err := openParent(root, dir)
	if err != nil {
		return err
	}
	defer unix.Close(parent)

	if base == whiteoutOpaque {
		fd, err := unix.Openat(parent, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening %q for its opaque mark: %w", dir, err)
		}
		defer unix.Close(fd)
		if err := unix.Fsetxattr(fd, opaqueXattr, []byte("y"), 0); err != nil {
			return fmt.Errorf("marking %q opaque: %w", dir, err)
		}
		return nil
	}
	if hidden, ok := strings.CutPrefix(base, whiteoutPrefix); ok {
		if hidden == "" || hidden == "." || hidden == ".." {
			return fmt.Errorf("%w: bad whiteout name", ErrUnsafeLayer)
		}
		if err := removeEntry(parent, hidden); err != nil {
			return err
		}
		return unix.Mknodat(parent, hidden, unix.S_IFCHR, 0)
	}

	mode := uint32(hdr.Mode & 07777)
	switch hdr.Typeflag {
	case tar.TypeDir:
		var s unix.Stat_t
		if err := unix.Fstatat(parent, base, &s, unix.AT_SYMLINK_NOFOLLOW); err == nil && s.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := removeEntry(parent, base); err != nil {
				return err
			}
		}
		if err := unix.Mkdirat(parent, base, 0o700); err != nil && err != unix.EEXIST {
			return fmt.Errorf("creating directory: %w", err)
		}
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA still appears in old tars
		if err := removeEntry(parent, base); err != nil {
			return err
		}
		fd, err := unix.Openat(parent, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("creating file: %w", err)
		}
		f := os.NewFile(uintptr(fd), base)
		n, err := io.Copy(f, r)
		st.Bytes += n
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing file: %w", err)
		}
	case tar.TypeSymlink:
		if err := checkSymlink(dir, hdr.Linkname); err != nil {
			return err
		}
		if err := removeEntry(parent, base); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, parent, base); err != nil {
			return fmt.Errorf("creating symlink: %w", err)
		}
	case tar.TypeLink:
		target, err := entryName(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link target: %w", err)
		}
		if target == "." {
			return fmt.Errorf("%w: hard link to the layer root", ErrUnsafeLayer)
		}
		tdir, tbase := path.Split(target)
		tparent, err := unix.Openat2(root, orDot(strings.TrimSuffix(tdir, "/")), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
		if err != nil {
			return fmt.Errorf("%w: hard link target %q is not inside the layer: %v", ErrUnsafeLayer, hdr.Linkname, err)
		}
		defer unix.Close(tparent)
		if err := removeEntry(parent, base); err != nil {
			return err
		}
		if err := unix.Linkat(tparent, tbase, parent, base, 0); err != nil {
			return fmt.Errorf("hard link to %q: %w", hdr.Linkname, err)
		}
		return nil // a link shares its target's owner, mode and times
	case tar.TypeFifo:
		if err := removeEntry(parent, base); err != nil {
			return err
		}
		if err := unix.Mknodat(parent, base, unix.S_IFIFO|0o600, 0); err != nil {
			return fmt.Errorf("creating fifo: %w", err)
		}
	case tar.TypeChar, tar.TypeBlock:
		st.SkippedDevices++
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return fmt.Errorf("unsupported tar entry type %q", hdr.Typeflag)
	}

	if err := unix.Fchownat(parent, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("setting owner: %w", err)
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// After chown, which clears set-id bits.
		if err := unix.Fchmodat(parent, base, mode, 0); err != nil {
			return fmt.Errorf("setting mode: %w", err)
		}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(hdr.ModTime.UnixNano()), unix.NsecToTimespec(hdr.ModTime.UnixNano())}
	if err := unix.UtimesNanoAt(parent, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("setting times: %w", err)
	}
	return nil
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// openParent opens dir (relative to root) as an O_PATH directory, creating
// missing components; it refuses to pass through a symlink.
func openParent(root int, dir string) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath}
	fd, err := unix.Openat2(root, orDot(dir), how)
	if err == nil {
		return fd, nil
	}
	if err != unix.ENOENT {
		return -1, fmt.Errorf("%w: parent %q: %v", ErrUnsafeLayer, dir, err)
	}
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(dir, "/") {
		next, err := unix.Openat2(cur, c, how)
		if err == unix.ENOENT {
			if err := unix.Mkdirat(cur, c, 0o755); err != nil && err != unix.EEXIST {
				unix.Close(cur)
				return -1, fmt.Errorf("creating parent %q: %w", dir, err)
			}
			next, err = unix.Openat2(cur, c, how)
		}
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("%w: parent %q: %v", ErrUnsafeLayer, dir, err)
		}
		cur = next
	}
	return cur, nil
}

// removeEntry removes name in parent if it is there (a later tar entry
// replaces an earlier one); a directory is removed with its contents.
func removeEntry(parent int, name string) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR {
		return fmt.Errorf("replacing %q: %w", name, err)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("replacing directory %q: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	names, err := d.Readdirnames(-1)
	if err != nil {
		d.Close()
		return fmt.Errorf("replacing directory %q: %w", name, err)
	}
	for _, n := range names {
		if err := removeEntry(fd, n); err != nil {
			d.Close()
			return err
		}
	}
	d.Close()
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("replacing directory %q: %w", name, err)
	}
	return nil
}

// checkSymlink rejects a relative symlink in dir whose target climbs above
// the layer root. Absolute targets are allowed: they are resolved inside
// the Sandbox's root when used, and extraction never follows a symlink.
func checkSymlink(dir, target string) error {
	if target == "" {
		return fmt.Errorf("%w: empty symlink target", ErrUnsafeLayer)
	}
	if path.IsAbs(target) {
		return nil
	}
	depth := 0
	if dir != "" {
		depth = len(strings.Split(dir, "/"))
	}
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return fmt.Errorf("%w: symlink target %q leaves the layer", ErrUnsafeLayer, target)
			}
		default:
			depth++
		}
	}
	return nil
}
