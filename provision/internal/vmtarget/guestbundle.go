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
		want = append(want, f.Path)
	}
	want = append(want, manifests.ManifestFile, manifests.SignatureFile)
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
` + CheckBundleScript(want, m.SHA256SUMS(), "the bundle in the VM") + `echo "bundle checked: $(wc -l < SHA256SUMS) files"
cd /
`
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CheckBundleScript is the shell that checks, in the current directory,
// an installed bundle (or the part of one a target needs): it holds
// exactly the files want (manifest paths; SHA256SUMS is added) and
// nothing else but directories, its SHA256SUMS is sums byte for byte
// (what the verified manifest implies for those files), and
// `sha256sum -c --strict` passes. what names the directory in the
// messages. Every failure names the file, and exits non-zero.
func CheckBundleScript(want []string, sums []byte, what string) string {
	list := make([]string, 0, len(want)+1)
	for _, p := range want {
		list = append(list, "./"+p)
	}
	list = append(list, "./"+manifests.SumsFile)
	sort.Strings(list)
	return `# Exactly these files, SHA256SUMS exactly the verified manifest's,
# and every file's digest as SHA256SUMS says.
# The list is kept beside the directory, where the installer may write
# (a guest's /tmp may not be).
want=$(mktemp ../.sealbench-want-XXXXXX)
cat > "$want" <<'EOF'
` + strings.Join(list, "\n") + `
EOF
find . -mindepth 1 ! -type d | LC_ALL=C sort | diff -u "$want" - >&2 || { rm -f "$want"; echo ` + ShellQuote(what+" holds other files than its manifest lists (+: not listed, -: missing)") + ` >&2; exit 1; }
rm -f "$want"
echo ` + ShellQuote(manifests.DigestOf(sums).Hex) + `'  SHA256SUMS' | sha256sum -c --quiet - || { echo ` + ShellQuote("SHA256SUMS in "+what+" is not the verified manifest's") + ` >&2; exit 1; }
sha256sum -c --quiet --strict SHA256SUMS >&2
`
}
