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

// timed returns a script that runs the barrier, then bodyCmd between two
// readings of the clock, and prints one line:
//
//	dirty writeback waitNs drained t0 t1 rc
//
// the counts at the start of the window (-1 where vmstat lacks one; both
// -2 where there is no vmstat at all, as under gVisor's Sentry: the
// barrier is then sync(2) alone), how
// long the barrier took, 1 if it drained and 0 if it reached the deadline,
// the window's start and end (ns on the Sandbox's clock), and bodyCmd's
// exit status. bodyCmd must write nothing to stdout.
func (b barrier) timed(bodyCmd string) string {
	return `b0=$(date +%s%N); sync; ok=0; d=-2; w=-2; ` +
		`if [ -r ` + b.vmstat + ` ]; then ` +
		`while :; do d=-1; w=-1; ` +
		`while read k v; do case $k in nr_dirty) d=$v;; nr_writeback) w=$v;; esac; done <` + b.vmstat + `; ` +
		`if [ "$d" -ge 0 ] && [ "$w" -ge 0 ] && [ $((d + w)) -le ` + strconv.FormatInt(b.maxPages, 10) + ` ]; then ok=1; break; fi; ` +
		`if [ $(($(date +%s%N) - b0)) -ge ` + strconv.FormatInt(b.deadline.Nanoseconds(), 10) + ` ]; then break; fi; ` +
		`sleep ` + strconv.FormatFloat(b.poll.Seconds(), 'f', -1, 64) + `; sync; done; fi; ` +
		`t0=$(date +%s%N); ` + bodyCmd + `; rc=$?; t1=$(date +%s%N); ` +
		`echo "$d $w $((t0 - b0)) $ok $t0 $t1 $rc"`
}

// timing is what a timed script printed.
type timing struct {
	barrier   manifests.Barrier
	commandNs int64 // t1 - t0
	rc        int
}

// parseTimed reads a timed script's line, strictly: one line, seven
// integers, counts and wait not negative, drained 0 or 1, the window not
// ending before it starts.
func parseTimed(out []byte) (timing, error) {
	bad := func(why string) (timing, error) {
		return timing{}, fmt.Errorf("timing the body: %s in %q", why, clip(string(out), 200))
	}
	line, ok := strings.CutSuffix(string(out), "\n")
	if !ok || strings.Contains(line, "\n") {
		return bad("not one line")
	}
	f := strings.Split(line, " ")
	if len(f) != 7 {
		return bad("not seven fields")
	}
	var n [7]int64
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(fmt.Sprintf("field %d is not an integer", i+1))
		}
		n[i] = v
	}
	dirty, writeback, waitNs, drained, t0, t1, rc := n[0], n[1], n[2], n[3], n[4], n[5], n[6]
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
	}
	return timing{
		barrier:   manifests.Barrier{DirtyPages: dirty, WritebackPages: writeback, WaitNs: waitNs, Drained: drained == 1, Unmeasured: unmeasured},
		commandNs: t1 - t0, rc: int(rc),
	}, nil
}
