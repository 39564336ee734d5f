package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
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
	SchemaVersion int             `json:"schemaVersion"`
	Kind          string          `json:"kind"`
	Name          string          `json:"name"` // "sandbox", "vm"
	Arch          string          `json:"arch"` // Debian architecture: amd64, arm64
	Spec          PackageSpec     `json:"spec"`
	Time          time.Time       `json:"time"` // when it was resolved; every mtime in the image
	Packages      []LockedPackage `json:"packages"`
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
	Filename string `json:"filename"` // the pool path the archive lists, for people; apt fetches by name=version
	Size     int64  `json:"size"`
	SHA256   Digest `json:"sha256"`
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
