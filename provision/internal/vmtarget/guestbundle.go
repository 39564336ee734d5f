package vmtarget

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sealbench/sealbench/manifests"
)

// InstallBundleScript is the shell, run as root inside a VM, that installs
// the bundle of verified manifest m at dir and checks it there, as every
// target booting the VM image does (lima, qemu): fill is the shell that
// puts the bundle's files into "$dir.new" (copied in, or unpacked from a
// disk). The files become root's, with the manifest's modes; then the
// directory must hold exactly the manifest's files, its SHA256SUMS must be
// the verified manifest's byte for byte, and `sha256sum -c --strict` must
// pass. The script stops (set -e) at the first failure.
func InstallBundleScript(m *manifests.BundleManifest, dir, fill string) string {
	var want []string
	for _, f := range m.Files {
		want = append(want, "./"+f.Path)
	}
	want = append(want, "./"+manifests.ManifestFile, "./"+manifests.SignatureFile, "./"+manifests.SumsFile)
	sort.Strings(want)
	var modes strings.Builder
	for _, f := range m.Files {
		fmt.Fprintf(&modes, "chmod %s %s\n", f.Mode, ShellQuote(f.Path))
	}
	return `set -eu
dir=` + ShellQuote(dir) + `
rm -rf "$dir" "$dir.new"
mkdir -p "$(dirname "$dir")"
` + fill + `
chown -R root:root "$dir.new"
find "$dir.new" -type d -exec chmod 0755 {} +
find "$dir.new" -type f -exec chmod 0644 {} +
cd "$dir.new"
` + modes.String() + `cd /
mv "$dir.new" "$dir"
cd "$dir"
# Exactly the manifest's files, SHA256SUMS exactly the verified manifest's,
# and every file's digest as SHA256SUMS says.
cat > /run/sealbench-want-files <<'EOF'
` + strings.Join(want, "\n") + `
EOF
find . -type f | LC_ALL=C sort | diff -u /run/sealbench-want-files - >&2 || { echo "the bundle in the VM holds other files than its manifest lists" >&2; exit 1; }
rm -f /run/sealbench-want-files
echo ` + ShellQuote(manifests.DigestOf(m.SHA256SUMS()).Hex) + `'  SHA256SUMS' | sha256sum -c --quiet - || { echo "SHA256SUMS in the VM is not the verified manifest's" >&2; exit 1; }
sha256sum -c --quiet --strict SHA256SUMS
echo "bundle checked: $(wc -l < SHA256SUMS) files"
cd /
`
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
