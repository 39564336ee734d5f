package vmimages

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/toolexec"
	"github.com/sealbench/sealbench/manifests"
)

// entry is one path of a layer being assembled.
type entry struct {
	hdr  tar.Header
	data []byte
}

// layerBuilder collects entries by path and writes them as one
// deterministic tar: sorted, every parent directory present, no user or
// group names, one fixed mtime.
type layerBuilder struct {
	entries map[string]*entry
	mtime   time.Time
}

func newLayerBuilder(mtime time.Time) *layerBuilder {
	return &layerBuilder{entries: map[string]*entry{}, mtime: mtime.UTC().Truncate(time.Second)}
}

func (b *layerBuilder) dir(p string, mode int64) {
	if _, ok := b.entries[p]; !ok {
		b.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p, Mode: mode}}
	}
}

func (b *layerBuilder) file(p string, mode int64, data []byte) {
	b.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}, data: data}
}

func (b *layerBuilder) symlink(p, target string) {
	b.entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777}}
}

// bytes writes the layer.
func (b *layerBuilder) bytes() ([]byte, error) {
	for p := range b.entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			b.dir(d, 0o755)
		}
	}
	names := make([]string, 0, len(b.entries))
	for p := range b.entries {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		e := b.entries[p]
		h := e.hdr
		h.Name = p
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.ModTime = b.mtime
		h.Uname, h.Gname = "", ""
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		h.PAXRecords = nil
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// usrMerged maps the directories Debian 12 merged into /usr.
var usrMerged = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

func mergeUsr(p string) string {
	first, _, _ := strings.Cut(p, "/")
	for _, m := range usrMerged {
		if first == m {
			return "usr/" + p
		}
	}
	return p
}

// dropped reports paths the image leaves out: documentation, manuals and
// translations, except each package's copyright file.
func dropped(p string) bool {
	if rest, ok := strings.CutPrefix(p, "usr/share/doc/"); ok {
		parts := strings.Split(rest, "/")
		keep := len(parts) == 1 || len(parts) == 2 && parts[1] == "copyright"
		return !keep
	}
	for _, pre := range []string{"usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/bug/"} {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

// cleanTarPath turns a package's "./usr/bin/x" into "usr/bin/x" ("" for
// the root itself), refusing anything that would leave the root.
func cleanTarPath(name string) (string, error) {
	p := path.Clean(strings.TrimPrefix(name, "./"))
	switch {
	case p == "." || p == "":
		return "", nil
	case path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../"):
		return "", fmt.Errorf("path %q leaves the root", name)
	}
	return p, nil
}

// addDeb unpacks one package's data into the layer, without running any of
// its maintainer scripts.
func (b *layerBuilder) addDeb(ctx context.Context, pkg, debPath string) error {
	cmd := toolexec.Command(ctx, "dpkg-deb", "--fsys-tarfile", debPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("unpacking %s: dpkg-deb: %w", pkg, err)
	}
	tr := tar.NewReader(out)
	var rerr error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = fmt.Errorf("unpacking %s: %w", pkg, err)
			break
		}
		p, err := cleanTarPath(h.Name)
		if err != nil {
			rerr = fmt.Errorf("unpacking %s: %w", pkg, err)
			break
		}
		if p == "" {
			continue
		}
		p = mergeUsr(p)
		if dropped(p) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			b.dir(p, h.Mode&0o7777)
		case tar.TypeReg:
			if old, ok := b.entries[p]; ok && old.hdr.Typeflag != tar.TypeDir {
				rerr = fmt.Errorf("unpacking %s: %s is shipped by another package too", pkg, p)
				break
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				rerr = err
				break
			}
			b.file(p, h.Mode&0o7777, data)
			b.entries[p].hdr.Uid, b.entries[p].hdr.Gid = h.Uid, h.Gid
		case tar.TypeSymlink:
			b.symlink(p, h.Linkname)
		case tar.TypeLink:
			target, err := cleanTarPath(h.Linkname)
			if err != nil {
				rerr = err
				break
			}
			target = mergeUsr(target)
			src, ok := b.entries[target]
			if !ok || src.hdr.Typeflag != tar.TypeReg {
				rerr = fmt.Errorf("unpacking %s: hard link %s to %s, which is not a file", pkg, p, target)
				break
			}
			// A copy, so that every file stands alone in the layer.
			b.file(p, src.hdr.Mode, src.data)
		default:
			rerr = fmt.Errorf("unpacking %s: %s has unsupported type %q", pkg, p, h.Typeflag)
		}
		if rerr != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil && rerr == nil {
		rerr = fmt.Errorf("unpacking %s: dpkg-deb: %v: %s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	return rerr
}

// baseExtras adds what maintainer scripts and debootstrap would have made,
// declared here instead of run: the /usr merge links, /bin/sh (dash's
// postinst), the directories a root needs, and minimal users, groups,
// hosts and nsswitch files.
func (b *layerBuilder) baseExtras() {
	for _, m := range usrMerged {
		if e, ok := b.entries["usr/"+m]; ok && e.hdr.Typeflag == tar.TypeDir {
			b.symlink(m, "usr/"+m)
		}
	}
	b.symlink("usr/bin/sh", "dash")
	for _, d := range []string{"dev", "proc", "sys", "run", "home", "etc", "opt", "mnt", "var", "var/lib", "usr/local/bin"} {
		b.dir(d, 0o755)
	}
	b.dir("root", 0o700)
	b.entries["tmp"] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o1777}}
	b.entries["var/tmp"] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o1777}}
	b.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"))
	b.file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
	b.file("etc/hosts", 0o644, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost\n"))
	b.file("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files\n"))
}

// baseLayer builds the root filesystem layer from the locked packages.
func baseLayer(ctx context.Context, l *manifests.PackageLock, debs map[string]string) ([]byte, error) {
	b := newLayerBuilder(l.Time)
	for _, p := range l.Packages {
		if err := b.addDeb(ctx, p.Name, debs[p.Name]); err != nil {
			return nil, err
		}
	}
	b.baseExtras()
	return b.bytes()
}
