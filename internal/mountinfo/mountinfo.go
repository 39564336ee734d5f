// Package mountinfo reads this process's mount table, /proc/self/mountinfo:
// what the audit, teardown, the stand-in's inventory and the LayerFS daemon
// look at to find mounts.
package mountinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// Mount is one mount point.
type Mount struct {
	Point  string `json:"point"`
	FSType string `json:"fsType"`
	Source string `json:"source"`
}

// Read returns every mount of this mount namespace, in the kernel's order.
// On a host that is not Linux it returns none: sealbench mounts nothing
// there (its FUSE mounts and Sandboxes live inside the targets' VMs).
func Read() ([]Mount, error) {
	if runtime.GOOS != "linux" {
		return nil, nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return parse(b), nil
}

// Parse reads a mountinfo file's text: another host's, read over SSH.
func Parse(b []byte) []Mount { return parse(b) }

func parse(b []byte) []Mount {
	var out []Mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		out = append(out, Mount{Point: unescape(f[4]), FSType: g[0], Source: unescape(g[1])})
	}
	return out
}

// Under returns the mounts at or below dir, deepest first: the order to
// unmount them in.
func Under(dir string) ([]Mount, error) {
	all, err := Read()
	if err != nil {
		return nil, err
	}
	return UnderOf(all, dir), nil
}

// UnderOf is Under, of the mounts all (Parse's, say).
func UnderOf(all []Mount, dir string) []Mount {
	var out []Mount
	for _, m := range all {
		if m.Point == dir || strings.HasPrefix(m.Point, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Point) > len(out[j].Point) })
	return out
}

// IsMountpoint reports whether dir is a mount point.
func IsMountpoint(dir string) bool {
	all, err := Read()
	if err != nil {
		return false
	}
	for _, m := range all {
		if m.Point == dir {
			return true
		}
	}
	return false
}

// unescape undoes the kernel's octal escapes (\040 for a space, ...).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
