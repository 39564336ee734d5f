package vmimages

import (
	"embed"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sealbench/sealbench/manifests"
)

// SandboxSpec is the one place that says what the Sandbox image's base
// holds: a POSIX shell, coreutils, findutils, git and ripgrep (the
// agent-tools suite's rg: one static-ish binary of 4 MiB whose libraries
// git's already are), and the libraries they link. Some dependencies are left out on purpose, because no cell runs
// what needs them: git's Perl helpers and manual, its HTTP transport
// (libcurl and its TLS stack, expat), and dpkg and debianutils, which only
// dash's maintainer scripts use (those never run; see baseExtras).
var SandboxSpec = manifests.PackageSpec{
	Roots:   []string{"coreutils", "dash", "findutils", "git", "ripgrep"},
	Exclude: []string{"debianutils", "dpkg", "git-man", "libcurl3-gnutls", "liberror-perl", "libexpat1", "perl"},
}

// ToolsSpec is the Sandbox image variant for suites that build code (the
// agent-tools suite's cargo and npm): SandboxSpec's packages and Debian's
// rustc, cargo, nodejs and npm, kept apart so that the twelve cells' image
// stays small (14 packages against 215). It keeps libcurl, which
// cargo links, and leaves out on purpose: the C toolchain rustc and cargo
// depend on (gcc, binutils, libc6-dev), which only linking an executable
// needs, never a library crate's build; what node-gyp runs (gyp with
// python3, and node's headers with libssl-dev), which only npm packages
// with native addons need (npm loads node-gyp's scripts, so those stay);
// and webpack, babel and eslint, which npm's dependencies pull
// in for their own builds and npm never loads. What runs in it checks
// this: T6's build and T7's install pass their verifiers in this image.
var ToolsSpec = manifests.PackageSpec{
	Roots: append(slices.Clone(SandboxSpec.Roots), "cargo", "nodejs", "npm", "rustc"),
	Exclude: append(slices.DeleteFunc(slices.Clone(SandboxSpec.Exclude), func(p string) bool { return p == "libcurl3-gnutls" }),
		"binutils", "eslint", "gcc", "gyp", "libc-dev", "libnode-dev", "node-babel7", "webpack"),
}

// The Sandbox image's variants: their locks' names.
const (
	VariantSandbox = "sandbox"       // the default: the twelve cells' tools
	VariantTools   = "sandbox-tools" // ToolsSpec
)

// A Variant is one Sandbox image a run can take: its lock's name and the
// packages it is resolved from.
type Variant struct {
	Name string
	Spec manifests.PackageSpec
}

// Variants are the Sandbox image's variants, smallest first: a run takes
// the first whose lock lists every package its suites name.
var Variants = []Variant{{VariantSandbox, SandboxSpec}, {VariantTools, ToolsSpec}}

// VariantFor returns the first variant whose committed lock for arch
// lists every package in need: the image a run of suites needing them
// loads. When none does, the error names what each lacks.
func VariantFor(arch string, need []string) (string, error) {
	var lacks []string
	for _, v := range Variants {
		l, _, err := DefaultLock(v.Name, arch)
		if err != nil {
			return "", err
		}
		have := l.PackageNames()
		var missing []string
		for _, p := range need {
			if !slices.Contains(have, p) && !slices.Contains(missing, p) {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return v.Name, nil
		}
		lacks = append(lacks, fmt.Sprintf("%s lacks %s", v.Name, strings.Join(missing, ", ")))
	}
	return "", fmt.Errorf("no Sandbox image carries the packages the suites need (%s)", strings.Join(lacks, "; "))
}

// ImageDir is where the Sandbox image of variant built for the bundle in
// bundleDir is kept: <bundle>.image for the default, <bundle>.tools.image
// for VariantTools.
func ImageDir(bundleDir, variant string) string {
	dir := filepath.Clean(bundleDir)
	if variant == "" || variant == VariantSandbox {
		return dir + ".image"
	}
	return dir + "." + strings.TrimPrefix(variant, "sandbox-") + ".image"
}

// repository is the image repository of a Sandbox image built from a lock
// named lockName: sealbench/sandbox, or sealbench/sandbox-tools.
func repository(lockName string) string {
	if lockName == VariantTools {
		return "sealbench/" + VariantTools
	}
	return Repository
}

// Arches are the Debian architectures images are built for.
var Arches = []string{"amd64", "arm64"}

//go:embed locks/*.json
var lockFiles embed.FS

// LockPath is where the source tree keeps a lock: vmimages/locks/NAME-ARCH.json.
func LockPath(name, arch string) string { return fmt.Sprintf("vmimages/locks/%s-%s.json", name, arch) }

// DefaultLock returns the lock this sealbench was built with.
func DefaultLock(name, arch string) (*manifests.PackageLock, []byte, error) {
	b, err := lockFiles.ReadFile(fmt.Sprintf("locks/%s-%s.json", name, arch))
	if err != nil {
		return nil, nil, fmt.Errorf("no %s lock for %s in this build: %w", name, arch, err)
	}
	l, err := manifests.ParsePackageLock(b)
	return l, b, err
}

// GoArch maps a Debian architecture to GOARCH (they agree for the two we build).
func GoArch(debArch string) string { return debArch }
