package runner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sealbench/sealbench/manifests"
)

// A write-back barrier stands before every timed window, LayerFS's and
// native's alike: sync(2), then a wait until the kernel's dirty and
// write-back pages (nr_dirty + nr_writeback in /proc/vmstat) are down to a
// few, re-running sync while they are not. Without it the 64 MiB that an
// earlier phase wrote (a warm-up, the other side's timed run, a Commit)
// is written back inside the next window, and the ratio measures who went
// second. The window starts at the deadline all the same; the sample says
// whether the pages drained and how many there were.
//
// The barrier runs in the same exec as the body, immediately before the
// window opens, so that nothing else runs between the two. It is POSIX sh
// as dash runs it, with the image's coreutils (date, sync, sleep) only.
type barrier struct {
	vmstat   string        // where the counts are read: /proc/vmstat
	maxPages int64         // drained: nr_dirty + nr_writeback at most this
	deadline time.Duration // the window opens after this, drained or not
	poll     time.Duration // the wait between two looks
}

// writeBack is the barrier every sample uses: 256 pages is 1 MiB at 4 KiB,
// against the 64 MiB a large-file cell writes; 10 s is far more than
// writing back 64 MiB takes on any disk here.
var writeBack = barrier{vmstat: "/proc/vmstat", maxPages: 256, deadline: 10 * time.Second, poll: 20 * time.Millisecond}

// prefault is what stands between the drain and the window: a throwaway
// file of bytes (whole MiB) written into dir and emptied at once. On a VM
// whose balloon reports free pages to the hypervisor, memory freed more
// than a moment ago may have been handed back, and writing into it again
// costs far more than writing into memory just freed; the window then
// pays for whatever the steps before it happened to free, or not. Writing
// and removing a file on the window's own filesystem leaves the pages the
// window will write freshly freed, in the shape its page cache takes them
// (an anonymous buffer, tried first, is freed as single pages, while the
// page cache of this kernel asks for large folios: see the design note),
// on every side alike. Emptied before write-back, its dirty pages are
// dropped, not written. It is emptied, not removed, and the next window's
// prefault writes the same file again: under protocol 5 the runner frees
// no inode of its own while samples are taken (see
// manifests.ProtocolVersion).
type prefault struct {
	dir   string // a directory on the window's filesystem, BodyUser's
	bytes int64  // 0: none
	// anon touches an anonymous buffer of bytes instead (dd reading
	// zeros into one block), with no file: the mechanism tried first,
	// kept for BenchmarkPrefault, which measures the two side by side.
	anon bool
}

// mib is p's size in whole MiB, rounded up.
func (p prefault) mib() int64 { return (p.bytes + 1<<20 - 1) >> 20 }

// timed returns a script that runs the barrier, then the prefault (when
// it has bytes), then bodyCmd between two readings of the clock, and
// prints one line:
//
//	dirty writeback waitNs drained t0 t1 rc prefaultBytes prefaultNs
//
// the counts at the start of the window (-1 where vmstat lacks one; both
// -2 where there is no vmstat at all, as under gVisor's Sentry: the
// barrier is then sync(2) alone), how long everything before the window
// took, 1 if the pages drained and 0 if it reached the deadline, the
// window's start and end (ns on the Sandbox's clock), bodyCmd's exit
// status, and the bytes the prefault wrote (0 when it could not) and what
// it took. bodyCmd must write nothing to stdout.
func (b barrier) timed(bodyCmd string, pf prefault) string {
	script := `pb=0; p0=0; p1=0; `
	if n := pf.mib(); n > 0 && pf.anon {
		script = `pb=` + strconv.FormatInt(n<<20, 10) + `; p0=$(date +%s%N); ` +
			`dd if=/dev/zero of=/dev/null bs=` + strconv.FormatInt(n<<20, 10) + ` count=1 2>/dev/null || pb=0; p1=$(date +%s%N); `
	} else if n > 0 {
		f := pf.dir + "/prefault.tmp"
		script = `pb=` + strconv.FormatInt(n<<20, 10) + `; p0=$(date +%s%N); ` +
			`{ dd if=/dev/zero of=` + f + ` bs=1M count=` + strconv.FormatInt(n, 10) + ` 2>/dev/null && : >` + f + `; } || { pb=0; { true >` + f + `; } 2>/dev/null; }; ` +
			`p1=$(date +%s%N); `
	}
	return `b0=$(date +%s%N); sync; ok=0; d=-2; w=-2; ` +
		`if [ -r ` + b.vmstat + ` ]; then ` +
		`while :; do d=-1; w=-1; ` +
		`while read k v; do case $k in nr_dirty) d=$v;; nr_writeback) w=$v;; esac; done <` + b.vmstat + `; ` +
		`if [ "$d" -ge 0 ] && [ "$w" -ge 0 ] && [ $((d + w)) -le ` + strconv.FormatInt(b.maxPages, 10) + ` ]; then ok=1; break; fi; ` +
		`if [ $(($(date +%s%N) - b0)) -ge ` + strconv.FormatInt(b.deadline.Nanoseconds(), 10) + ` ]; then break; fi; ` +
		`sleep ` + strconv.FormatFloat(b.poll.Seconds(), 'f', -1, 64) + `; sync; done; fi; ` +
		script +
		`t0=$(date +%s%N); ` + bodyCmd + `; rc=$?; t1=$(date +%s%N); ` +
		`echo "$d $w $((t0 - b0)) $ok $t0 $t1 $rc $pb $((p1 - p0))"`
}

// timing is what a timed script printed.
type timing struct {
	barrier   manifests.Barrier
	commandNs int64 // t1 - t0
	rc        int
}

// parseTimed reads a timed script's line, strictly: one line, nine
// integers, counts and waits not negative, drained 0 or 1, the window not
// ending before it starts, the prefault within the wait.
func parseTimed(out []byte) (timing, error) {
	bad := func(why string) (timing, error) {
		return timing{}, fmt.Errorf("timing the body: %s in %q", why, clip(string(out), 200))
	}
	line, ok := strings.CutSuffix(string(out), "\n")
	if !ok || strings.Contains(line, "\n") {
		return bad("not one line")
	}
	f := strings.Split(line, " ")
	if len(f) != 9 {
		return bad("not nine fields")
	}
	var n [9]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(fmt.Sprintf("field %d is not an integer", i+1))
		}
		n[i] = v
	}
	dirty, writeback, waitNs, drained, t0, t1, rc, prefaultBytes, prefaultNs := n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8]
	unmeasured := dirty == -2 && writeback == -2
	if unmeasured {
		dirty, writeback = 0, 0
	}
	switch {
	case dirty < 0 || writeback < 0:
		return timing{}, errors.New("the write-back barrier found no nr_dirty or nr_writeback in /proc/vmstat")
	case waitNs < 0:
		return bad("a negative wait")
	case drained != 0 && drained != 1:
		return bad("drained is not 0 or 1")
	case t0 <= 0 || t1 < t0:
		return bad("the window ends before it starts")
	case rc < 0 || rc > 255:
		return bad("an exit status out of range")
	case prefaultBytes < 0 || prefaultNs < 0 || prefaultNs > waitNs:
		return bad("a prefault that is negative or longer than the wait")
	}
	return timing{
		barrier: manifests.Barrier{DirtyPages: dirty, WritebackPages: writeback, WaitNs: waitNs, Drained: drained == 1, Unmeasured: unmeasured,
			PrefaultBytes: prefaultBytes, PrefaultNs: prefaultNs},
		commandNs: t1 - t0, rc: int(rc),
	}, nil
}
