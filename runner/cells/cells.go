package cells

import (
	"crypto/sha1"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// bodies are the cell bodies, C01.sh..C12.sh: POSIX sh, sealed into the
// bundle's cells/ (bundle.CellsSourceDir is this directory).
//
//go:embed *.sh
var bodies embed.FS

// Timeout bounds every cell body, and each verifier check.
const Timeout = 2 * time.Minute

// EmulatedTimeout is Timeout on a target whose CPU is emulated (QEMU's
// TCG, 10 to 50 times slower than the host): C02's thousand creates took
// over two minutes in a Lima VM here while the host's other core was
// busy, a failure that said nothing about the target.
const EmulatedTimeout = 5 * Timeout

// TimeoutOn is the bound of a cell body on a target, emulated or not.
func TimeoutOn(emulated bool) time.Duration {
	if emulated {
		return EmulatedTimeout
	}
	return Timeout
}

// Cell is one workload of a suite (the twelve's C01..C12, or another
// suite's): its body, its setup and base, and its verifier.
type Cell struct {
	Name  string // C01..C12, T1...: unique across the suites of a run
	Title string // what the body does, in a few words
	Body  string // the body's file name: in its suite's Dir in the bundle (cells/ for the twelve, beside this package's source)
	// Setup, when set, is a script in the suite's Dir run untimed in the
	// base directory as the body's user, after the base file is put
	// there: what it leaves is the base Layer, and the native reference's
	// starting directory.
	Setup string
	// Base is "" for an empty base, or BaseFile: the cell's base Layer then
	// holds the 64 MiB base file (see BaseReader).
	Base string
	// Verifies says in a line what the verifier checks.
	Verifies string
	// MapsFiles says the body mmap(2)s files in the workspace (git maps
	// its config, index and objects), which a FUSE without mmap, as
	// gVisor's, cannot serve.
	MapsFiles bool
	// Writes is how many bytes of file data the body writes, or copies
	// up: the page cache its timed window fills, which the protocol's
	// prefault makes resident first. 0 for the bodies that write a few
	// KiB.
	Writes int64
	// LaunchToExit: each sample also times the cell as a whole task, from
	// its Sandbox's launch to its exit (manifests.Sample.LaunchToExitNs).
	LaunchToExit bool
	checks       func() []Check
	suite        *Suite
}

// Suite is the suite the cell is of.
func (c *Cell) Suite() *Suite { return c.suite }

// Path is where the body sits in the bundle: its suite's Dir, then Body.
func (c *Cell) Path() string { return c.suite.Dir + "/" + c.Body }

// SetupPath is where the setup sits in the bundle, "" for a cell with none.
func (c *Cell) SetupPath() string {
	if c.Setup == "" {
		return ""
	}
	return c.suite.Dir + "/" + c.Setup
}

// Source returns the body's text, as sealed into the bundle.
func (c *Cell) Source() []byte {
	if c.suite != nil && c.suite.Files != nil {
		return c.suite.Files[c.Body]
	}
	b, err := bodies.ReadFile(c.Body)
	if err != nil {
		panic("cells: no body file for " + c.Name + ": " + err.Error()) // the registry test holds them together
	}
	return b
}

// Verifier returns the cell's verifier. Its expected digests are computed
// on first use, which for C09-C11 means generating the base file once.
func (c *Cell) Verifier() Verifier {
	return Verifier{Cell: c.Name, Checks: c.checks()}
}

// All is the twelve cells, by name: the default suite.
var All = map[string]*Cell{
	"C01": {Name: "C01", Title: "create 1,000 files", Body: "C01.sh", checks: numberedFiles},
	"C02": {Name: "C02", Title: "create 1,000, stat 1,000", Body: "C02.sh", checks: numberedFiles},
	"C03": {Name: "C03", Title: "create 1,000, remove them", Body: "C03.sh", checks: func() []Check {
		return []Check{{Name: "empty directory", Script: `find . -mindepth 1 | wc -l`, Want: "0"}}
	}},
	"C04": {Name: "C04", Title: "100 directories, 1,000 files", Body: "C04.sh", checks: tree},
	"C05": {Name: "C05", Title: "that tree, then find", Body: "C05.sh", checks: func() []Check {
		return append(tree(),
			Check{Name: "find printed 1,100 entries", Script: `wc -l`, Want: "1100"},
			Check{Name: "find printed the tree", Script: `LC_ALL=C sort | sha256sum | cut -c1-64`, Want: treeListDigest()},
		)
	}},
	"C06": {Name: "C06", Title: "write 64 MiB", Body: "C06.sh", Writes: BaseSize, checks: func() []Check {
		return []Check{fileCount(1), sizeAndDigest("out.bin", ZerosDigest().Hex)}
	}},
	"C07": {Name: "C07", Title: "write 64 MiB, copy it", Body: "C07.sh", Writes: 2 * BaseSize, checks: func() []Check {
		return []Check{fileCount(2), sizeAndDigest("out.bin", ZerosDigest().Hex), sizeAndDigest("copy.bin", ZerosDigest().Hex)}
	}},
	"C08": {Name: "C08", Title: "write 64 MiB, read it", Body: "C08.sh", Writes: BaseSize, checks: func() []Check {
		return []Check{fileCount(1), sizeAndDigest("out.bin", ZerosDigest().Hex)}
	}},
	"C09": {Name: "C09", Title: "read a 64 MiB base file", Body: "C09.sh", Base: BaseFile, checks: func() []Check {
		return []Check{
			fileCount(1), sizeAndDigest(BaseFile, BaseDigest().Hex),
			{Name: "printed SHA-256 is the base file's", Script: `cat`, Want: BaseDigest().Hex + "  " + BaseFile},
		}
	}},
	"C10": {Name: "C10", Title: "copy a 64 MiB base file", Body: "C10.sh", Base: BaseFile, Writes: BaseSize, checks: func() []Check {
		return []Check{fileCount(2), sizeAndDigest(BaseFile, BaseDigest().Hex), sizeAndDigest("copy.bin", BaseDigest().Hex)}
	}},
	"C11": {Name: "C11", Title: "overwrite a 64 MiB base file", Body: "C11.sh", Base: BaseFile, Writes: BaseSize, checks: func() []Check {
		return []Check{fileCount(1), sizeAndDigest(BaseFile, ZerosDigest().Hex)}
	}},
	"C12": {Name: "C12", Title: "git init, 100 files, add, commit", Body: "C12.sh", MapsFiles: true, checks: gitRepo},
}

func init() {
	s := &Suite{Name: manifests.DefaultSuite, Title: "the twelve filesystem cells", Dir: "cells"}
	for _, n := range Names() {
		c := All[n]
		c.suite, c.Verifies = s, verifies[n]
		s.Cells = append(s.Cells, c)
	}
	Register(s)
}

// verifies says what each of the twelve's verifiers checks (DESIGN.md's
// table, and what their checks add to it).
var verifies = map[string]string{
	"C01": "1,000 files f1..f1000, each holding \"file N\"",
	"C02": "1,000 files f1..f1000, each holding \"file N\"",
	"C03": "an empty directory",
	"C04": "100 directories, 1,000 empty files, the tree's names",
	"C05": "the C04 tree, and find printed its 1,100 entries",
	"C06": "one file: its size and SHA-256",
	"C07": "both files' size and SHA-256",
	"C08": "one file: its size and SHA-256",
	"C09": "the printed SHA-256 is the base file's",
	"C10": "the copy's SHA-256 equals the base's",
	"C11": "the new contents; the base Layer itself unchanged",
	"C12": "one commit, 100 tracked files, their contents, a clean work tree",
}

// Names returns the twelve cells' names in order.
func Names() []string {
	names := make([]string, 0, len(All))
	for n := range All {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// UnknownError names a cell that is in none of the suites looked in.
type UnknownError struct {
	Name string
	In   string // the suites' cells, as the message lists them; "" for the built-in suites
}

func (e *UnknownError) Error() string {
	if e.In != "" {
		return fmt.Sprintf("unknown cell %q (the cells are %s)", e.Name, e.In)
	}
	return fmt.Sprintf("unknown cell %q (the cells are %s..%s, or a cell of suites %s)", e.Name, Names()[0], Names()[len(All)-1], strings.Join(SuiteNames(), ", "))
}

// Lookup returns the named cell of a built-in suite, or an *UnknownError.
func Lookup(name string) (*Cell, error) {
	if c, ok := All[name]; ok {
		return c, nil
	}
	for _, s := range Suites() {
		if c := s.Cell(name); c != nil {
			return c, nil
		}
	}
	return nil, &UnknownError{Name: name}
}

// Parse parses a comma-separated list of the twelve's cell names
// ("C01,C09"), refusing unknown and repeated names; "" or "all" is every
// cell. Select does the same for any suites.
func Parse(s string) ([]string, error) {
	sel, err := Select("", nil, s)
	if err != nil {
		return nil, err
	}
	return sel.Cells, nil
}

// The checks the cells share.

// inventoryScript prints the number of regular files under the workspace
// and their total size: what a sample records as files and bytes.
const inventoryScript = `find . -type f -exec stat -c %s {} + | { n=0; b=0; while read -r s; do n=$((n+1)); b=$((b+s)); done; echo "$n $b"; }`

func fileCount(n int) Check {
	return Check{Name: fmt.Sprintf("regular files: %d", n), Script: `find . -type f | wc -l`, Want: fmt.Sprint(n)}
}

// sizeAndDigest checks one file's size and SHA-256.
func sizeAndDigest(name, hexDigest string) Check {
	return Check{
		Name:   name + " size and SHA-256",
		Script: fmt.Sprintf(`printf '%%s %%s\n' "$(stat -c %%s %s)" "$(sha256sum <%s | cut -c1-64)"`, name, name),
		Want:   fmt.Sprintf("%d %s", BaseSize, hexDigest),
	}
}

// numberedFiles checks C01 and C02's result: f1..f1000 and nothing else,
// each holding "file N".
func numberedFiles() []Check {
	return []Check{
		fileCount(1000),
		{Name: "no directories", Script: `find . -mindepth 1 -type d | wc -l`, Want: "0"},
		{
			Name:   "f1..f1000 hold \"file N\"",
			Script: `set --; i=1; while [ "$i" -le 1000 ]; do set -- "$@" "f$i"; i=$((i+1)); done; cat -- "$@" | sha256sum | cut -c1-64`,
			Want:   numberedContentsDigest(1000),
		},
	}
}

func numberedContentsDigest(n int) string {
	h := sha256.New()
	for i := 1; i <= n; i++ {
		fmt.Fprintf(h, "file %d\n", i)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tree checks C04 and C05's tree: d1..d100, each with empty f1..f10.
func tree() []Check {
	return []Check{
		{Name: "100 directories", Script: `find . -mindepth 1 -type d | wc -l`, Want: "100"},
		fileCount(1000),
		{Name: "every file empty", Script: `find . -type f ! -size 0 | wc -l`, Want: "0"},
		{Name: "the tree's names", Script: `find . -mindepth 1 | LC_ALL=C sort | sha256sum | cut -c1-64`, Want: treeListDigest()},
	}
}

// treeListDigest is the SHA-256 of what `find . -mindepth 1 | LC_ALL=C
// sort` prints for the C04 tree.
func treeListDigest() string {
	var names []string
	for d := 1; d <= 100; d++ {
		names = append(names, fmt.Sprintf("./d%d", d))
		for f := 1; f <= 10; f++ {
			names = append(names, fmt.Sprintf("./d%d/f%d", d, f))
		}
	}
	sort.Strings(names) // byte order, as LC_ALL=C sort
	return hex.EncodeToString(sha256Of(strings.Join(names, "\n") + "\n"))
}

// gitRepo checks C12: one commit whose tree is exactly f1..f100 holding
// "file N", and a clean work tree.
func gitRepo() []Check {
	const git = `git -c safe.directory='*' `
	return []Check{
		{Name: "one commit", Script: git + `rev-list --count HEAD`, Want: "1"},
		{Name: "100 tracked files", Script: git + `ls-files | wc -l`, Want: "100"},
		{Name: "committed contents", Script: git + `ls-tree -r HEAD | sha256sum | cut -c1-64`, Want: gitTreeListDigest(100)},
		{Name: "clean work tree", Script: git + `status --porcelain | wc -l`, Want: "0"},
	}
}

// gitTreeListDigest is the SHA-256 of what `git ls-tree -r HEAD` prints for
// f1..fn holding "file N": one line per blob, by name in byte order, with
// the blob's git object id.
func gitTreeListDigest(n int) string {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("f%d", i))
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		content := "file " + strings.TrimPrefix(name, "f") + "\n"
		oid := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(content), content)))
		fmt.Fprintf(&b, "100644 blob %x\t%s\n", oid, name)
	}
	return hex.EncodeToString(sha256Of(b.String()))
}

func sha256Of(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
