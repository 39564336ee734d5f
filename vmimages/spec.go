package vmimages

import (
	"embed"
	"fmt"

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
