package vmimages

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// ErrNoApt says this machine has no apt to fetch packages with.
var ErrNoApt = errors.New("apt is not available on this machine (sealbench builds images from Debian packages through apt)")

// apt runs apt-get and apt-cache for one architecture against a private
// state directory: the host's sources and keyrings, but our own package
// lists, cache and (empty) dpkg status, so resolution does not depend on
// what the host has installed and never changes it.
type apt struct {
	arch string
	root string
}

func newApt(cacheDir, arch string) (*apt, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return nil, ErrNoApt
	}
	a := &apt{arch: arch, root: filepath.Join(cacheDir, "apt-"+arch)}
	for _, d := range []string{"state/lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(a.root, d), 0o755); err != nil {
			return nil, fmt.Errorf("creating apt state: %w", err)
		}
	}
	status := filepath.Join(a.root, "status")
	if _, err := os.Stat(status); err != nil {
		if err := os.WriteFile(status, nil, 0o644); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *apt) options() []string {
	return []string{
		"-o", "APT::Architecture=" + a.arch,
		"-o", "APT::Architectures::=" + a.arch,
		"-o", "Dir::State=" + filepath.Join(a.root, "state"),
		"-o", "Dir::State::status=" + filepath.Join(a.root, "status"),
		"-o", "Dir::Cache=" + filepath.Join(a.root, "cache"),
		"-o", "Debug::NoLocking=1",
		"-o", "APT::Sandbox::User=root",
		"-o", "Acquire::Languages=none",
		"-o", "Acquire::http::Timeout=60",
		"-o", "Acquire::Retries=2",
		"-q",
	}
}

// aptTimeout bounds one apt command: apt can wait forever on a stalled
// mirror or a full disk, and a build must fail instead.
const aptTimeout = 15 * time.Minute

func (a *apt) run(ctx context.Context, dir, tool string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, aptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, append(a.options(), args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// update fetches the package lists for a.arch.
func (a *apt) update(ctx context.Context) error {
	_, err := a.run(ctx, a.root, "apt-get", "update")
	if err != nil {
		return fmt.Errorf("updating the package lists for %s: %w", a.arch, err)
	}
	return nil
}

// hasLists reports whether update has run.
func (a *apt) hasLists() bool {
	ents, _ := os.ReadDir(filepath.Join(a.root, "state", "lists"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "_Packages") || strings.Contains(e.Name(), "_Packages.") {
			return true
		}
	}
	return false
}

// stanza is one package record from apt-cache show.
type stanza map[string]string

// show returns the candidate record of a package, or nil when apt knows none.
func (a *apt) show(ctx context.Context, name string) (stanza, error) {
	out, err := a.run(ctx, a.root, "apt-cache", "show", "--no-all-versions", name)
	if err != nil {
		if strings.Contains(err.Error(), "No packages found") || strings.Contains(err.Error(), "Unable to locate") || strings.Contains(err.Error(), "has no installation candidate") {
			return nil, nil
		}
		return nil, err
	}
	st := parseStanza(out)
	if st["Package"] == "" {
		return nil, nil // a virtual package
	}
	return st, nil
}

func parseStanza(b []byte) stanza {
	st := stanza{}
	var key string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(st) > 0 {
				break // only the first record
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key != "" {
				st[key] += "\n" + line
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = k
		st[k] = strings.TrimSpace(v)
	}
	return st
}

// depNames parses a Depends field into groups of alternative package names.
func depNames(field string) [][]string {
	var groups [][]string
	for _, g := range strings.Split(field, ",") {
		var alts []string
		for _, alt := range strings.Split(g, "|") {
			alt = strings.TrimSpace(alt)
			if i := strings.IndexAny(alt, " ([<"); i >= 0 {
				alt = alt[:i]
			}
			alt, _, _ = strings.Cut(alt, ":") // name:any
			if alt != "" {
				alts = append(alts, alt)
			}
		}
		if len(alts) > 0 {
			groups = append(groups, alts)
		}
	}
	return groups
}

// resolve walks Depends and Pre-Depends from the roots, taking the first
// alternative apt has a candidate for, skipping excluded names, and returns
// the closure as locked packages sorted by name.
func (a *apt) resolve(ctx context.Context, spec manifests.PackageSpec) ([]manifests.LockedPackage, error) {
	exclude := map[string]bool{}
	for _, e := range spec.Exclude {
		exclude[e] = true
	}
	records := map[string]stanza{}
	lookup := func(name string) (stanza, error) {
		if st, ok := records[name]; ok {
			return st, nil
		}
		st, err := a.show(ctx, name)
		if err != nil {
			return nil, err
		}
		records[name] = st
		return st, nil
	}
	chosen := map[string]stanza{}
	queue := append([]string{}, spec.Roots...)
	for _, r := range spec.Roots {
		st, err := lookup(r)
		if err != nil {
			return nil, err
		}
		if st == nil {
			return nil, fmt.Errorf("package %q is not in the package lists for %s: check its name, or run with a mirror that has it", r, a.arch)
		}
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if chosen[name] != nil || exclude[name] {
			continue
		}
		st, err := lookup(name)
		if err != nil {
			return nil, err
		}
		chosen[name] = st
		for _, field := range []string{st["Pre-Depends"], st["Depends"]} {
		groups:
			for _, alts := range depNames(field) {
				for _, alt := range alts {
					if exclude[alt] {
						continue groups
					}
				}
				for _, alt := range alts {
					if chosen[alt] != nil {
						continue groups
					}
				}
				for _, alt := range alts {
					st, err := lookup(alt)
					if err != nil {
						return nil, err
					}
					if st != nil {
						queue = append(queue, alt)
						continue groups
					}
				}
				return nil, fmt.Errorf("%s depends on %s, and apt has no candidate for any of them", name, strings.Join(alts, " | "))
			}
		}
	}
	var pkgs []manifests.LockedPackage
	for name, st := range chosen {
		size, err := strconv.ParseInt(st["Size"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("package %s: bad Size %q", name, st["Size"])
		}
		d, err := manifests.ParseDigest("sha256:" + st["SHA256"])
		if err != nil {
			return nil, fmt.Errorf("package %s: bad SHA256: %w", name, err)
		}
		pkgs = append(pkgs, manifests.LockedPackage{
			Name: name, Version: st["Version"], Arch: st["Architecture"],
			Filename: st["Filename"], Size: size, SHA256: d,
		})
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	return pkgs, nil
}

// download fetches exactly name=version of each package through apt into
// dir, and returns the file of each by name.
func (a *apt) download(ctx context.Context, dir string, pkgs []manifests.LockedPackage) (map[string]string, error) {
	args := []string{"download"}
	for _, p := range pkgs {
		args = append(args, p.Name+"="+p.Version)
	}
	if _, err := a.run(ctx, dir, "apt-get", args...); err != nil {
		if strings.Contains(err.Error(), "Can't find a source") || strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "Unable to locate") {
			return nil, fmt.Errorf("a locked package is missing from the mirror (the archive moved on?): %w; refresh the lock with `sealbench image lock`", err)
		}
		return nil, fmt.Errorf("downloading packages: %w", err)
	}
	files := map[string]string{}
	for _, p := range pkgs {
		name := fmt.Sprintf("%s_%s_%s.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
		full := filepath.Join(dir, name)
		if _, err := os.Stat(full); err != nil {
			return nil, fmt.Errorf("apt-get download did not produce %s for %s=%s", name, p.Name, p.Version)
		}
		files[p.Name] = full
	}
	return files, nil
}
