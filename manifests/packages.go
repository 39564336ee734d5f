package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The package lock format.
const (
	PackageLockSchemaVersion = 1
	PackageLockKind          = "sealbench.packages"
)

// PackageLock pins the exact Debian packages an image is built from:
// the packages asked for (Spec), and the full dependency closure apt
// resolved for them, each with its version and SHA-256. Building never
// resolves versions itself; `sealbench image lock` refreshes the file.
type PackageLock struct {
	SchemaVersion int         `json:"schemaVersion"`
	Kind          string      `json:"kind"`
	Name          string      `json:"name"` // "sandbox", "vm"
	Arch          string      `json:"arch"` // Debian architecture: amd64, arm64
	Spec          PackageSpec `json:"spec"`
	// Time is when the lock was resolved: every locked version was in the
	// archive then (snapshot.debian.org is asked for the archive as of this
	// time), and it is every mtime in the image.
	Time     time.Time       `json:"time"`
	Packages []LockedPackage `json:"packages"`
}

// PackageSpec is what a lock was resolved from.
type PackageSpec struct {
	Roots   []string `json:"roots"`   // packages asked for
	Exclude []string `json:"exclude"` // dependencies deliberately left out (not needed by the cells)
}

// LockedPackage is one exact package.
type LockedPackage struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Arch     string `json:"arch"`     // the package's own architecture: amd64, arm64 or all
	Filename string `json:"filename"` // the pool path the archive lists; apt fetches by name=version
	Size     int64  `json:"size"`
	SHA256   Digest `json:"sha256"`
	// Archive is the Debian archive the version came from: "debian" or
	// "debian-security" (as snapshot.debian.org names them). Locks written
	// before it was recorded leave it out; SnapshotArchive derives it.
	Archive string `json:"archive,omitempty"`
}

// The archives a locked package can come from.
const (
	ArchiveDebian   = "debian"
	ArchiveSecurity = "debian-security"
)

// SnapshotArchive returns the archive p came from: the recorded one, or,
// for locks that did not record it, the one its pool path implies (the
// security archive's pool is pool/updates/).
func (p LockedPackage) SnapshotArchive() string {
	if p.Archive != "" {
		return p.Archive
	}
	if strings.HasPrefix(p.Filename, "pool/updates/") {
		return ArchiveSecurity
	}
	return ArchiveDebian
}

var (
	debNameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debVersionRE = regexp.MustCompile(`^[0-9A-Za-z.+~:-]+$`)
	debArchRE    = regexp.MustCompile(`^[a-z0-9]+$`)
)

// ParsePackageLock reads a lock file: Load, FillDefaults, Validate.
func ParsePackageLock(b []byte) (*PackageLock, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var l PackageLock
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("parsing package lock: %w", err)
	}
	if l.SchemaVersion > PackageLockSchemaVersion {
		return nil, fmt.Errorf("package lock has schema version %d, newer than the %d this sealbench reads", l.SchemaVersion, PackageLockSchemaVersion)
	}
	l.FillDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// FillDefaults sets what a hand-edited lock may leave out.
func (l *PackageLock) FillDefaults() {
	if l.Kind == "" {
		l.Kind = PackageLockKind
	}
	if l.Spec.Exclude == nil {
		l.Spec.Exclude = []string{}
	}
}

// Validate reports every problem with l, each naming its field.
func (l *PackageLock) Validate() error {
	p := &problems{doc: "package lock"}
	if l.SchemaVersion != PackageLockSchemaVersion {
		p.addf("schemaVersion", "is %d, want %d", l.SchemaVersion, PackageLockSchemaVersion)
	}
	if l.Kind != PackageLockKind {
		p.addf("kind", "is %q, want %q", l.Kind, PackageLockKind)
	}
	if l.Name == "" {
		p.addf("name", "missing")
	}
	if !debArchRE.MatchString(l.Arch) {
		p.addf("arch", "%q is not a Debian architecture", l.Arch)
	}
	if len(l.Spec.Roots) == 0 {
		p.addf("spec.roots", "missing")
	}
	if l.Time.IsZero() {
		p.addf("time", "missing")
	}
	if len(l.Packages) == 0 {
		p.addf("packages", "missing")
	}
	seen := map[string]bool{}
	for i, pkg := range l.Packages {
		f := fmt.Sprintf("packages[%d]", i)
		if !debNameRE.MatchString(pkg.Name) {
			p.addf(f+".name", "%q is not a Debian package name", pkg.Name)
		}
		if seen[pkg.Name] {
			p.addf(f+".name", "%q is listed twice", pkg.Name)
		}
		seen[pkg.Name] = true
		if i > 0 && l.Packages[i-1].Name >= pkg.Name {
			p.addf(f+".name", "%q is out of order: packages are sorted by name", pkg.Name)
		}
		if !debVersionRE.MatchString(pkg.Version) {
			p.addf(f+".version", "%q is not a Debian version", pkg.Version)
		}
		if pkg.Arch != "all" && pkg.Arch != l.Arch {
			p.addf(f+".arch", "%q is neither %q nor \"all\"", pkg.Arch, l.Arch)
		}
		if pkg.Size <= 0 {
			p.addf(f+".size", "must be positive")
		}
		if err := pkg.SHA256.Validate(); err != nil {
			p.addf(f+".sha256", "%v", err)
		}
		if pkg.Archive != "" && pkg.Archive != ArchiveDebian && pkg.Archive != ArchiveSecurity {
			p.addf(f+".archive", "%q is neither %q nor %q", pkg.Archive, ArchiveDebian, ArchiveSecurity)
		}
		if pkg.Filename != "" && (!strings.HasPrefix(pkg.Filename, "pool/") || strings.Contains(pkg.Filename, "..")) {
			p.addf(f+".filename", "%q is not a pool path", pkg.Filename)
		}
	}
	for i, r := range l.Spec.Roots {
		if !seen[r] {
			p.addf(fmt.Sprintf("spec.roots[%d]", i), "%q is not among the locked packages", r)
		}
	}
	return p.err()
}

// Marshal returns the lock as indented JSON with a trailing newline.
func (l *PackageLock) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// PackageChange is one package whose locked version differs between two
// locks; Old or New is empty where the package is in only one of them.
type PackageChange struct {
	Name string `json:"name"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// String reads "git 1:2.39.5-0+deb12u2 -> 1:2.39.5-0+deb12u3".
func (c PackageChange) String() string {
	old, new := c.Old, c.New
	if old == "" {
		old = "(none)"
	}
	if new == "" {
		new = "(none)"
	}
	return c.Name + " " + old + " -> " + new
}

// DiffLocks lists, sorted by name, the packages whose version differs
// between old and new, including those only one of them has.
func DiffLocks(old, new *PackageLock) []PackageChange {
	was := map[string]string{}
	for _, p := range old.Packages {
		was[p.Name] = p.Version
	}
	var out []PackageChange
	for _, p := range new.Packages {
		if v, ok := was[p.Name]; !ok || v != p.Version {
			out = append(out, PackageChange{Name: p.Name, Old: v, New: p.Version})
		}
		delete(was, p.Name)
	}
	for n, v := range was {
		out = append(out, PackageChange{Name: n, Old: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PackageNames are the names of the packages the lock lists, in its order.
func (l *PackageLock) PackageNames() []string {
	out := make([]string, len(l.Packages))
	for i, p := range l.Packages {
		out[i] = p.Name
	}
	return out
}
