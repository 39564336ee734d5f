package microsandbox

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealbench/sealbench/internal/toolexec"
)

// TestParseGlibcVersion: what getconf and ldd print on real systems (the
// Debian 12 lines are this machine's, verbatim).
func TestParseGlibcVersion(t *testing.T) {
	for out, want := range map[string]GlibcVersion{
		"glibc 2.36\n": {2, 36}, // getconf GNU_LIBC_VERSION, Debian 12
		"ldd (Debian GLIBC 2.36-9+deb12u14) 2.36\nCopyright (C) 2022 Free Software Foundation, Inc.\nThis is free software; see the source for copying conditions.  There is NO\n": {2, 36},
		"ldd (Ubuntu GLIBC 2.39-0ubuntu8.4) 2.39\nCopyright (C) 2024 Free Software Foundation, Inc.\n":                                                                             {2, 39},
		"ldd (GNU libc) 2.40\n": {2, 40}, // Fedora 41
		"ldd (GNU libc) 2.28\n": {2, 28}, // RHEL 8
		"glibc 2.41.9000\n":     {2, 41},
	} {
		got, err := ParseGlibcVersion(out)
		if err != nil || got != want {
			t.Errorf("ParseGlibcVersion(%q) = %v, %v; want %v", out, got, err, want)
		}
	}
	// Alpine's ldd (musl) prints this to stderr and exits 1.
	if _, err := ParseGlibcVersion("musl libc (x86_64)\nVersion 1.2.5\nDynamic Program Loader\n"); !errors.Is(err, ErrNotGlibc) {
		t.Errorf("musl: %v", err)
	}
	for _, bad := range []string{"", "getconf: Unrecognized variable `GNU_LIBC_VERSION'", "ldd (GNU libc) two"} {
		if v, err := ParseGlibcVersion(bad); err == nil {
			t.Errorf("ParseGlibcVersion(%q) = %v", bad, v)
		}
	}
}

// TestHostGlibc: on a glibc host, what getconf says.
func TestHostGlibc(t *testing.T) {
	out, err := exec.Command("getconf", "GNU_LIBC_VERSION").Output()
	if err != nil {
		t.Skipf("getconf GNU_LIBC_VERSION: %v (not a glibc host)", err)
	}
	want, err := ParseGlibcVersion(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := HostGlibc(context.Background()); err != nil || got != want {
		t.Errorf("HostGlibc = %v, %v; want %v", got, err, want)
	}
}

func TestGlibcFloor(t *testing.T) {
	for v, want := range map[string]GlibcVersion{"0.6.8": {2, 39}, "0.6.10": {2, 39}, "0.6.11": {2, 28}, "0.6.14": {2, 28}, "0.7.0": {2, 28}} {
		if got := GlibcFloor(toolexec.MustVersion(v)); got != want {
			t.Errorf("GlibcFloor(%s) = %v; want %v", v, got, want)
		}
	}
}

// TestGlibcCheck: Debian 12's glibc 2.36 runs msb 0.6.11 and later, not
// 0.6.10 and older; the detail says which, and why.
func TestGlibcCheck(t *testing.T) {
	v := func(s string) *toolexec.Version { x := toolexec.MustVersion(s); return &x }
	debian12 := GlibcVersion{2, 36}
	for _, c := range []struct {
		host   GlibcVersion
		have   *toolexec.Version
		ok     bool
		detail string
	}{
		{debian12, v("0.6.10"), false, "glibc 2.36, but msb 0.6.10 needs glibc 2.39 or newer; of the releases sealbench drives, msb 0.6.8 to 0.6.10 (built on Ubuntu 24.04, they need glibc 2.39: GLIBC_2.39 symbols); msb 0.6.11 to 0.6.14 (built for glibc 2.28)"},
		{debian12, v("0.6.14"), true, "glibc 2.36: msb 0.6.14 needs 2.28 or newer"},
		{debian12, nil, true, "glibc 2.36: enough for msb 0.6.11 to 0.6.14 (built for glibc 2.28), not for msb 0.6.8 to 0.6.10 (built on Ubuntu 24.04, they need glibc 2.39: GLIBC_2.39 symbols); no msb installed to ask"},
		{GlibcVersion{2, 39}, v("0.6.8"), true, "glibc 2.39: msb 0.6.8 needs 2.39 or newer"},
		{GlibcVersion{2, 39}, nil, true, "enough for every msb sealbench drives"},
		{GlibcVersion{2, 27}, nil, false, "glibc 2.27: too old for every msb"},
	} {
		got := glibcCheck(c.host, nil, c.have)
		if got.Name != GlibcCheckName || got.OK != c.ok || !strings.Contains(got.Detail, c.detail) || (!got.OK && got.Fix == "") {
			t.Errorf("glibc %v, msb %v: %+v; want ok %v and %q", c.host, c.have, got, c.ok, c.detail)
		}
	}
	if got := glibcCheck(debian12, nil, v("0.6.10")); !strings.Contains(got.Fix, "upgrade msb to 0.6.11 or later") {
		t.Errorf("the fix for msb 0.6.10 on glibc 2.36: %q", got.Fix)
	}
	if got := glibcCheck(GlibcVersion{}, ErrNotGlibc, nil); got.OK || !strings.Contains(got.Detail, "cannot tell this host's glibc") {
		t.Errorf("without glibc: %+v", got)
	}
}

// TestKVMCheck: no device, or one that does not open for reading and
// writing, is a failure with what to do.
func TestKVMCheck(t *testing.T) {
	dir := t.TempDir()
	if c := kvmCheck(filepath.Join(dir, "kvm")); c.OK || !strings.Contains(c.Detail, "is not there") || !strings.Contains(c.Fix, "modprobe") {
		t.Errorf("no device: %+v", c)
	}
	if c := kvmCheck(dir); c.OK || !strings.Contains(c.Detail, "does not open for reading and writing") || !strings.Contains(c.Fix, "kvm") {
		t.Errorf("a device that does not open: %+v", c)
	}
}
