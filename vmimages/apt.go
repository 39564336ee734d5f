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
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/internal/toolexec"
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
	cmd := toolexec.Command(ctx, tool, append(a.options(), args...)...)
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

// showAll returns the candidate record of each name apt has one for;
// virtual and unknown names are absent from the result. One apt-cache call
// for all of them: loading apt's cache dominates the cost of a call.
func (a *apt) showAll(ctx context.Context, names []string) (map[string]stanza, error) {
	res := map[string]stanza{}
	if len(names) == 0 {
		return res, nil
	}
	out, err := a.run(ctx, a.root, "apt-cache", append([]string{"show", "--no-all-versions"}, names...)...)
	// apt-cache show fails when any name is virtual or unknown, but still
	// prints the others; what it printed is what we take.
	if err != nil && len(out) == 0 && !strings.Contains(err.Error(), "No packages found") && !strings.Contains(err.Error(), "Unable to locate") && !strings.Contains(err.Error(), "no installation candidate") {
		return nil, err
	}
	for _, st := range parseStanzas(out) {
		if n := st["Package"]; n != "" {
			if _, dup := res[n]; !dup {
				res[n] = st
			}
		}
	}
	return res, nil
}

// providers maps each virtual package name to the real packages that
// provide it, from every record apt knows.
func (a *apt) providers(ctx context.Context) (map[string][]string, error) {
	out, err := a.run(ctx, a.root, "apt-cache", "dumpavail")
	if err != nil {
		return nil, err
	}
	prov := map[string][]string{}
	for _, st := range parseStanzas(out) {
		for _, group := range depNames(st["Provides"]) {
			for _, v := range group {
				prov[v] = append(prov[v], st["Package"])
			}
		}
	}
	for v := range prov {
		sort.Strings(prov[v])
	}
	return prov, nil
}

func parseStanzas(b []byte) []stanza {
	var all []stanza
	st := stanza{}
	var key string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(st) > 0 {
				all = append(all, st)
				st = stanza{}
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
	if len(st) > 0 {
		all = append(all, st)
	}
	return all
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

// resolve walks Depends and Pre-Depends from the roots, level by level,
// taking the first alternative apt has a candidate for (or, for a virtual
// package, its first provider), skipping excluded names, and returns the
// closure as locked packages sorted by name.
func (a *apt) resolve(ctx context.Context, spec manifests.PackageSpec) ([]manifests.LockedPackage, error) {
	exclude := map[string]bool{}
	for _, e := range spec.Exclude {
		exclude[e] = true
	}
	records := map[string]stanza{} // every name looked up; nil when virtual
	lookup := func(names []string) error {
		var fresh []string
		for _, n := range names {
			if _, ok := records[n]; !ok {
				fresh = append(fresh, n)
			}
		}
		got, err := a.showAll(ctx, fresh)
		if err != nil {
			return err
		}
		for _, n := range fresh {
			records[n] = got[n]
		}
		return nil
	}
	var prov map[string][]string
	chosen := map[string]stanza{}
	if err := lookup(spec.Roots); err != nil {
		return nil, err
	}
	for _, r := range spec.Roots {
		if records[r] == nil {
			return nil, fmt.Errorf("package %q is not in the package lists for %s: check its name, or run with a mirror that has it", r, a.arch)
		}
	}
	level := append([]string{}, spec.Roots...)
	for len(level) > 0 {
		var groups [][]string
		var owners []string
		for _, name := range level {
			if chosen[name] != nil || exclude[name] {
				continue
			}
			st := records[name]
			chosen[name] = st
			for _, field := range []string{st["Pre-Depends"], st["Depends"]} {
				for _, g := range depNames(field) {
					groups = append(groups, g)
					owners = append(owners, name)
				}
			}
		}
		var all []string
		for _, g := range groups {
			all = append(all, g...)
		}
		if err := lookup(all); err != nil {
			return nil, err
		}
		next := map[string]bool{}
	groups:
		for i, alts := range groups {
			for _, alt := range alts {
				if exclude[alt] || chosen[alt] != nil || next[alt] {
					continue groups
				}
			}
			for _, alt := range alts {
				if records[alt] != nil {
					next[alt] = true
					continue groups
				}
			}
			// Only virtual packages: take a provider, one already chosen if any.
			if prov == nil {
				var err error
				if prov, err = a.providers(ctx); err != nil {
					return nil, err
				}
			}
			var cands []string
			for _, alt := range alts {
				cands = append(cands, prov[alt]...)
			}
			for _, c := range cands {
				if chosen[c] != nil || next[c] {
					continue groups
				}
			}
			if len(cands) == 0 {
				return nil, fmt.Errorf("%s depends on %s, and apt has no candidate for any of them", owners[i], strings.Join(alts, " | "))
			}
			if err := lookup(cands[:1]); err != nil {
				return nil, err
			}
			if records[cands[0]] == nil {
				return nil, fmt.Errorf("%s depends on %s, provided by %s, which apt has no candidate for", owners[i], strings.Join(alts, " | "), cands[0])
			}
			next[cands[0]] = true
		}
		level = level[:0]
		for n := range next {
			level = append(level, n)
		}
		sort.Strings(level)
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
		pkgs[len(pkgs)-1].Archive = pkgs[len(pkgs)-1].SnapshotArchive()
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].Name < pkgs[j].Name })
	return pkgs, nil
}

// versions returns, for each name apt's lists know, every version they
// list (not only the candidate), in one apt-cache call.
func (a *apt) versions(ctx context.Context, names []string) (map[string][]string, error) {
	res := map[string][]string{}
	if len(names) == 0 {
		return res, nil
	}
	out, err := a.run(ctx, a.root, "apt-cache", append([]string{"show"}, names...)...)
	if err != nil && len(out) == 0 && !strings.Contains(err.Error(), "No packages found") && !strings.Contains(err.Error(), "Unable to locate") && !strings.Contains(err.Error(), "no installation candidate") {
		return nil, err
	}
	for _, st := range parseStanzas(out) {
		if n, v := st["Package"], st["Version"]; n != "" && v != "" {
			res[n] = append(res[n], v)
		}
	}
	return res, nil
}

// downloadAvailable fetches, into dir, every package of pkgs whose exact
// version apt's lists have, and says for each of the others why not.
func (a *apt) downloadAvailable(ctx context.Context, dir string, pkgs []manifests.LockedPackage) (map[string]string, map[string]string, error) {
	got, why := map[string]string{}, map[string]string{}
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.Name
	}
	vers, err := a.versions(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	var want []manifests.LockedPackage
	for _, p := range pkgs {
		if slices.Contains(vers[p.Name], p.Version) {
			want = append(want, p)
		} else if len(vers[p.Name]) == 0 {
			why[p.Name] = "not in the package lists"
		} else {
			why[p.Name] = "not in the package lists (they have " + strings.Join(vers[p.Name], ", ") + ")"
		}
	}
	if len(want) == 0 {
		return got, why, nil
	}
	files, err := a.download(ctx, dir, want)
	if err == nil {
		return files, why, nil
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	// One of them failed (a mirror that lost a file its lists still name):
	// one at a time, to know which.
	for _, p := range want {
		f, err := a.download(ctx, dir, []manifests.LockedPackage{p})
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			why[p.Name] = err.Error()
			continue
		}
		got[p.Name] = f[p.Name]
	}
	return got, why, nil
}

// download fetches exactly name=version of each package through apt into
// dir, and returns the file of each by name.
func (a *apt) download(ctx context.Context, dir string, pkgs []manifests.LockedPackage) (map[string]string, error) {
	args := []string{"download"}
	for _, p := range pkgs {
		args = append(args, p.Name+"="+p.Version)
	}
	if _, err := a.run(ctx, dir, "apt-get", args...); err != nil {
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
