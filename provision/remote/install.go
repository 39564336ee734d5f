package remote

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealbench/sealbench/bundle"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/internal/vmtarget"
	"github.com/sealbench/sealbench/sshx"
)

// Platform asks the host what it runs (`uname -sm`), as the bundle names
// its binaries' directories: linux/amd64, linux/arm64.
func Platform(ctx context.Context, c *sshx.Client) (bundle.Platform, error) {
	out, err := c.Exec(ctx, sshx.Command{Name: "uname", Argv: []string{"uname", "-sm"}})
	if err != nil {
		return bundle.Platform{}, err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return bundle.Platform{}, fmt.Errorf("`uname -sm` on %s says %q: want the kernel and the machine", c, strings.TrimSpace(string(out)))
	}
	p := bundle.Platform{OS: strings.ToLower(f[0])}
	switch f[1] {
	case "x86_64", "amd64":
		p.Arch = "amd64"
	case "aarch64", "arm64":
		p.Arch = "arm64"
	}
	for _, known := range bundle.Platforms {
		if p == known {
			return p, nil
		}
	}
	return bundle.Platform{}, fmt.Errorf("%s runs %s on %s, for which a bundle has no binaries (it has %v)", c, f[0], f[1], bundle.Platforms)
}

// HostBundle is some files of a verified bundle installed in a directory
// on a host: those a remote target needs there, and the SHA256SUMS lines
// of exactly those files.
type HostBundle struct {
	SSH *sshx.Client
	// Host is the host as the ledger records it (ssh://user@host:port),
	// Target the target the directory is recorded for.
	Host, Target string
	// Bundle is the verified bundle directory here, Manifest its verified
	// manifest.
	Bundle   string
	Manifest *manifests.BundleManifest
	// Files are the manifest paths to install (bin/linux-amd64/standin).
	Files []string
	// Dir is the directory on the host (absolute): it must lie in the
	// run's directory there, and holds nothing else.
	Dir string
}

// Install records Dir in rec (with the host) before it makes it, copies
// each file into it (hashed as it is read here and again as written
// there, sshx.CopyFile), writes their SHA256SUMS lines, and then Checks
// the directory. A directory left from an earlier Install is replaced.
func (b *HostBundle) Install(ctx context.Context, rec interface {
	Record(manifests.LedgerEntry) error
}) error {
	files, err := b.files()
	if err != nil {
		return err
	}
	if err := rec.Record(manifests.LedgerEntry{Target: b.Target, Host: b.Host, Kind: manifests.ResourceDir, Key: b.Dir,
		Detail: "the bundle's files the target needs"}); err != nil {
		return err
	}
	dirs := map[string]bool{b.Dir: true}
	for _, f := range files {
		dirs[path.Join(b.Dir, path.Dir(f.Path))] = true
	}
	mk := []string{"sh", "-c", `d=$1; shift; rm -rf -- "$d" && umask 022 && mkdir -p -- "$@"`, "sh", b.Dir}
	for d := range dirs {
		mk = append(mk, d)
	}
	sort.Strings(mk[5:])
	if _, err := b.SSH.Exec(ctx, sshx.Command{Name: "mkdir-bundle", Argv: mk}); err != nil {
		return fmt.Errorf("making the bundle's directory on %s: %w", b.Host, err)
	}
	for _, f := range files {
		if err := b.copy(ctx, f); err != nil {
			return err
		}
	}
	sums := b.sums()
	if err := b.SSH.CopyFile(ctx, path.Join(b.Dir, manifests.SumsFile), 0o644, strings.NewReader(string(sums)), int64(len(sums)), manifests.DigestOf(sums)); err != nil {
		return fmt.Errorf("writing the bundle's SHA256SUMS on %s: %w", b.Host, err)
	}
	return b.Check(ctx)
}

func (b *HostBundle) copy(ctx context.Context, f manifests.BundleFile) error {
	in, err := os.Open(filepath.Join(b.Bundle, filepath.FromSlash(f.Path)))
	if err != nil {
		return fmt.Errorf("the bundle's %s: %w", f.Path, err)
	}
	defer in.Close()
	if err := b.SSH.CopyFile(ctx, path.Join(b.Dir, f.Path), fs.FileMode(f.Mode), in, f.Size, f.Digest); err != nil {
		return fmt.Errorf("the bundle's %s: %w", f.Path, err)
	}
	return nil
}

// files are the manifest's entries for Files, or an error naming the
// first it does not list.
func (b *HostBundle) files() ([]manifests.BundleFile, error) {
	if !path.IsAbs(b.Dir) || path.Clean(b.Dir) != b.Dir || b.Dir == "/" {
		return nil, fmt.Errorf("installing the bundle on %s: %q is not an absolute, clean directory", b.Host, b.Dir)
	}
	if len(b.Files) == 0 {
		return nil, errors.New("installing the bundle: no files named")
	}
	var out []manifests.BundleFile
	for _, p := range b.Files {
		f, ok := b.Manifest.File(p)
		if !ok {
			return nil, fmt.Errorf("the bundle has no %s, which the target needs on %s: seal a bundle for that platform", p, b.Host)
		}
		out = append(out, f)
	}
	return out, nil
}

// sums is what the verified manifest implies SHA256SUMS holds for Files.
func (b *HostBundle) sums() []byte {
	want := map[string]bool{}
	for _, p := range b.Files {
		want[p] = true
	}
	return b.Manifest.SHA256SUMSOf(func(p string) bool { return want[p] })
}

// Check checks Dir on the host as the VM targets check their guest's
// bundle: it holds exactly Files and SHA256SUMS, SHA256SUMS is what the
// verified manifest implies for Files byte for byte, and `sha256sum -c
// --strict` passes. The error names what differs.
func (b *HostBundle) Check(ctx context.Context) error {
	if _, err := b.files(); err != nil {
		return err
	}
	script := "set -eu\ncd \"$1\"\n" + vmtarget.CheckBundleScript(b.Files, b.sums(), b.Dir+" on "+b.Host)
	// The script goes on stdin, so that an error shows what it said, not
	// the script.
	_, err := b.SSH.Exec(ctx, sshx.Command{Name: "check-bundle", Argv: []string{"sh", "-s", "--", b.Dir}, Stdin: strings.NewReader(script)})
	var ce *sshx.CommandError
	if errors.As(err, &ce) && ce.ExitCode > 0 {
		return fmt.Errorf("the bundle's files at %s on %s are not the verified ones (refusing to run them): %s", b.Dir, b.Host, strings.TrimSpace(ce.Stderr))
	}
	return err
}
