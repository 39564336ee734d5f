package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The bundle format.
const (
	// BundleSchemaVersion is the manifest schema this code writes and reads.
	BundleSchemaVersion = 1
	// BundleKind is the manifest's "kind" field.
	BundleKind = "sealbench.bundle"

	// ManifestFile, SignatureFile and SumsFile are the bundle's own files.
	// They are not listed in the manifest: the signature covers the
	// manifest, and SHA256SUMS is derived from it byte for byte.
	ManifestFile  = "manifest.json"
	SignatureFile = "manifest.sig"
	SumsFile      = "SHA256SUMS"

	// BundleNamePrefix starts every bundle's name.
	BundleNamePrefix = "build-linux-"

	// SandboxBundleDir is where the bundle is in the Sandbox image, and
	// so in every Sandbox and in the VMs booted from that image.
	SandboxBundleDir = "/opt/sealbench"

	// MaxManifestSize bounds how much of a manifest is ever read.
	MaxManifestSize = 16 << 20
	// MaxBundleFileSize bounds a declared file size (1 TiB).
	MaxBundleFileSize = 1 << 40
	// MaxPathLen bounds a manifest path.
	MaxPathLen = 1024
)

// BundleManifest lists every file of a bundle with its size, mode and
// digest, and says where the bundle came from. It is what the signature
// covers. A signed manifest is never defaulted: what was signed is what is
// checked, so there is no FillDefaults for it.
type BundleManifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	Kind          string       `json:"kind"`
	Source        BundleSource `json:"source"`
	Files         []BundleFile `json:"files"`
}

// BundleSource is the bundle's source identity.
type BundleSource struct {
	Module    string    `json:"module"`
	Version   string    `json:"version"`
	Commit    string    `json:"commit"` // empty when the source is not a git checkout
	Dirty     bool      `json:"dirty"`
	Time      time.Time `json:"time"` // SOURCE_DATE_EPOCH or the commit time; every mtime in the bundle
	GoVersion string    `json:"goVersion"`
	// BuildFlags and BuildEnv are exactly what every binary was built with.
	BuildFlags []string `json:"buildFlags"`
	BuildEnv   []string `json:"buildEnv"`
	Platforms  []string `json:"platforms"` // "linux/amd64", ...
}

// BundleFile is one file of the bundle.
type BundleFile struct {
	Path   string   `json:"path"` // slash-separated, relative to the bundle root
	Size   int64    `json:"size"`
	Mode   FileMode `json:"mode"`
	Digest Digest   `json:"digest"`
}

// FileMode is a file's permission bits, written as an octal string ("0755").
type FileMode uint32

// String returns the mode as four octal digits.
func (m FileMode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// MarshalText implements encoding.TextMarshaler.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *FileMode) UnmarshalText(b []byte) error {
	if len(b) != 4 || b[0] != '0' {
		return fmt.Errorf("mode %q: want four octal digits such as \"0644\"", b)
	}
	v, err := strconv.ParseUint(string(b), 8, 32)
	if err != nil {
		return fmt.Errorf("mode %q: %w", b, err)
	}
	*m = FileMode(v)
	return nil
}

// BundleName is the name of the bundle whose manifest.json has these bytes.
func BundleName(manifestJSON []byte) string {
	return BundleNamePrefix + DigestOf(manifestJSON).Short(12)
}

// ParseBundleManifest reads a manifest strictly: no unknown fields, no
// trailing data, at most MaxManifestSize bytes. Then it validates it, and
// last it requires the bytes to be the canonical encoding (what Marshal
// writes), so that no two byte strings that verify mean the same manifest
// and no reader can see a duplicate key differently than this one does.
func ParseBundleManifest(b []byte) (*BundleManifest, error) {
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("manifest is %d bytes, more than the %d allowed", len(b), MaxManifestSize)
	}
	// Refuse a newer schema before complaining about fields it may add.
	var head struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(b, &head); err == nil && head.SchemaVersion > BundleSchemaVersion {
		return nil, fmt.Errorf("manifest has schema version %d, newer than the %d this sealbench reads: use a newer sealbench", head.SchemaVersion, BundleSchemaVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m BundleManifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("parsing manifest: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parsing manifest: trailing data after the JSON document")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	canon, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canon, b) {
		return nil, errors.New("manifest is not in canonical form (as sealbench writes it): it was edited or written by another tool")
	}
	return &m, nil
}

// ReadBundleManifest reads at most MaxManifestSize bytes from r and parses them.
func ReadBundleManifest(r io.Reader) (*BundleManifest, []byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxManifestSize+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading manifest: %w", err)
	}
	m, err := ParseBundleManifest(b)
	return m, b, err
}

// Marshal returns the canonical encoding: indented JSON, files sorted by
// path, one trailing newline.
func (m *BundleManifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// SortFiles puts Files in the canonical order, by path.
func (m *BundleManifest) SortFiles() {
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
}

// Validate reports every problem with m, each naming its field.
func (m *BundleManifest) Validate() error {
	p := &problems{doc: "bundle manifest"}
	switch {
	case m.SchemaVersion == 0:
		p.addf("schemaVersion", "missing")
	case m.SchemaVersion != BundleSchemaVersion:
		p.addf("schemaVersion", "is %d; this sealbench reads %d", m.SchemaVersion, BundleSchemaVersion)
	}
	if m.Kind != BundleKind {
		p.addf("kind", "is %q, want %q", m.Kind, BundleKind)
	}
	s := m.Source
	if s.Module == "" {
		p.addf("source.module", "missing")
	}
	if s.Version == "" {
		p.addf("source.version", "missing")
	}
	if s.Commit != "" && !isHex(s.Commit, 40) && !isHex(s.Commit, 64) {
		p.addf("source.commit", "%q is not a 40- or 64-character lowercase hex commit id", s.Commit)
	}
	if s.Commit == "" && !s.Dirty {
		p.addf("source.dirty", "must be true when source.commit is empty (a tree that is not a git checkout)")
	}
	if s.Time.IsZero() || s.Time.Unix() < 0 {
		p.addf("source.time", "missing or before 1970")
	} else if s.Time.Location() != time.UTC || s.Time.Nanosecond() != 0 {
		p.addf("source.time", "must be whole seconds in UTC")
	}
	if !strings.HasPrefix(s.GoVersion, "go1.") {
		p.addf("source.goVersion", "%q does not look like a Go version (go1.N...)", s.GoVersion)
	}
	if len(s.Platforms) == 0 {
		p.addf("source.platforms", "missing")
	}
	for i, pl := range s.Platforms {
		if os, arch, ok := strings.Cut(pl, "/"); !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			p.addf(fmt.Sprintf("source.platforms[%d]", i), "%q is not os/arch", pl)
		}
	}

	if len(m.Files) == 0 {
		p.addf("files", "missing: a bundle has at least one file")
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		field := fmt.Sprintf("files[%d]", i)
		if err := ValidateBundlePath(f.Path); err != nil {
			p.addf(field+".path", "%v", err)
		} else {
			if seen[f.Path] {
				p.addf(field+".path", "%q is listed twice", f.Path)
			}
			seen[f.Path] = true
			if i > 0 && m.Files[i-1].Path >= f.Path {
				p.addf(field+".path", "%q is out of order: files are sorted by path", f.Path)
			}
		}
		if f.Size < 0 || f.Size > MaxBundleFileSize {
			p.addf(field+".size", "%d is outside 0..%d", f.Size, int64(MaxBundleFileSize))
		}
		if f.Mode&^0o777 != 0 {
			p.addf(field+".mode", "%s has bits other than permissions (setuid, setgid, sticky or a type)", f.Mode)
		}
		if err := f.Digest.Validate(); err != nil {
			p.addf(field+".digest", "%v", err)
		}
	}
	// A path may not be both a file and a directory ("bin" and "bin/x").
	for _, f := range m.Files {
		for dir := path.Dir(f.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if seen[dir] {
				p.addf("files", "%q is listed as a file but is also the directory of %q", dir, f.Path)
			}
		}
	}
	return p.err()
}

// ValidateBundlePath checks one manifest path: relative, clean,
// slash-separated, valid UTF-8, without "..", NUL, newlines, carriage returns
// or backslashes, and not one of the bundle's own files.
func ValidateBundlePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > MaxPathLen:
		return fmt.Errorf("path is %d bytes, more than %d", len(p), MaxPathLen)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8", p)
	case strings.ContainsAny(p, "\x00\n\r\\"):
		return fmt.Errorf("path %q contains NUL, a newline, a carriage return or a backslash", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	}
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "..":
			return fmt.Errorf("path %q contains \"..\"", p)
		case ".", "":
			return fmt.Errorf("path %q is not clean (empty or \".\" element)", p)
		}
	}
	switch p {
	case ManifestFile, SignatureFile, SumsFile:
		return fmt.Errorf("path %q is reserved for the bundle's own files", p)
	}
	return nil
}

// File returns the entry for path, if the manifest lists it.
func (m *BundleManifest) File(p string) (BundleFile, bool) {
	i := sort.Search(len(m.Files), func(i int) bool { return m.Files[i].Path >= p })
	if i < len(m.Files) && m.Files[i].Path == p {
		return m.Files[i], true
	}
	return BundleFile{}, false
}

// Dirs returns every directory the manifest's files imply, sorted.
func (m *BundleManifest) Dirs() []string {
	set := map[string]bool{}
	for _, f := range m.Files {
		for dir := path.Dir(f.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
			set[dir] = true
		}
	}
	dirs := make([]string, 0, len(set))
	for d := range set {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// SHA256SUMS returns the SHA256SUMS file for the manifest, in the format
// `sha256sum -c` reads: "<hex>  <path>" per line, sorted by path.
func (m *BundleManifest) SHA256SUMS() []byte { return m.sums(func(string) bool { return true }) }

// InSandbox reports whether a bundle file goes into the Sandbox image:
// everything but the binaries for other OSes (the macOS runner stays in
// the bundle, for macOS hosts).
func InSandbox(path string) bool {
	return !strings.HasPrefix(path, "bin/") || strings.HasPrefix(path, "bin/linux-")
}

// SandboxSHA256SUMS is the SHA256SUMS of the bundle as the Sandbox image
// holds it: the lines of the files InSandbox keeps.
func (m *BundleManifest) SandboxSHA256SUMS() []byte { return m.sums(InSandbox) }

// SHA256SUMSOf is the SHA256SUMS of the files of the manifest that keep
// keeps: what a target that installs only some of a bundle's files on a
// host checks them against there.
func (m *BundleManifest) SHA256SUMSOf(keep func(path string) bool) []byte { return m.sums(keep) }

func (m *BundleManifest) sums(keep func(string) bool) []byte {
	var b bytes.Buffer
	for _, f := range m.Files {
		if keep(f.Path) {
			fmt.Fprintf(&b, "%s  %s\n", f.Digest.Hex, f.Path)
		}
	}
	return b.Bytes()
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
