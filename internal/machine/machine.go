// Package machine reads what the kernel of the machine it runs on does
// with free memory and CPU frequency: whether a balloon driver reports
// free pages to a hypervisor (and how much it has reported), transparent
// hugepages, swap, the CPU frequency governor. A benchmark has no
// business changing any of them, but it must know them: on a VM whose
// balloon does free page reporting, memory freed more than a couple of
// seconds earlier is handed back to the hypervisor, and writing into it
// again costs far more than writing into memory just freed. It also
// names the ext4 filesystems mounted without a journal, where creating a
// file costs more the more inodes were freed nearby in the last minute.
//
// It only reads files under /sys and /proc (the standard library and
// internal/mountinfo only), so the bundle's runner and the doctor both
// link it.
package machine

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sealbench/sealbench/internal/mountinfo"
	"github.com/sealbench/sealbench/manifests"
)

// The files Probe reads, under its root.
const (
	balloonDevices       = "sys/bus/virtio/drivers/virtio_balloon"
	hypervBalloonDevices = "sys/bus/vmbus/drivers/hv_balloon"
	reportedKiB          = "sys/module/page_reporting/parameters/reported_kib"
	thpEnabled           = "sys/kernel/mm/transparent_hugepage/enabled"
	meminfo              = "proc/meminfo"
	governor             = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
	mountInfo            = "proc/self/mountinfo"
	ext4Devices          = "proc/fs/ext4" // a directory per mounted ext4, named as its device
	jbd2Journals         = "proc/fs/jbd2" // a directory per journal, named <device>-8
)

// virtioBalloonFReporting is the virtio balloon's feature bit for free
// page reporting (VIRTIO_BALLOON_F_REPORTING, virtio spec 5.5.3).
const virtioBalloonFReporting = 5

// Probe reads the machine under root ("/" for this one; a test gives a
// tree of its own). What it cannot read it leaves at its zero value, or
// unknown for page reporting: it never fails.
func Probe(root string) manifests.Machine {
	var m manifests.Machine
	m.PageReporting, m.Balloon = pageReporting(root)
	if v, ok := ReportedKiB(root); ok {
		m.ReportedKiBStart = &v
	}
	m.TransparentHugepages = bracketed(readTrim(filepath.Join(root, thpEnabled)))
	m.SwapBytes = swapBytes(filepath.Join(root, meminfo))
	m.CPUFreqGovernor = readTrim(filepath.Join(root, governor))
	m.UnjournaledExt4 = unjournaledExt4(root)
	return m
}

// unjournaledExt4 are the mount points of the ext4 filesystems mounted
// without a journal: those /proc/fs/ext4 lists whose device has no jbd2
// journal in /proc/fs/jbd2 (an external journal is named after its own
// device, so such a filesystem counts as unjournaled too: rare, and the
// pin says so of its mount point only), as this mount namespace's
// mountinfo names them.
func unjournaledExt4(root string) []string {
	devs, err := os.ReadDir(filepath.Join(root, ext4Devices))
	if err != nil {
		return nil
	}
	bare := map[string]bool{}
	for _, d := range devs {
		if _, err := os.Stat(filepath.Join(root, jbd2Journals, d.Name()+"-8")); err != nil {
			bare[d.Name()] = true
		}
	}
	if len(bare) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(root, mountInfo))
	if err != nil {
		return nil
	}
	var mps []string
	for _, m := range mountinfo.Parse(b) {
		if m.FSType == "ext4" && bare[filepath.Base(m.Source)] && !slices.Contains(mps, m.Point) {
			mps = append(mps, m.Point)
		}
	}
	return mps
}

// Ext4Advice says what an ext4 without a journal does to the metadata
// cells and what a reader of the numbers should make of it.
const Ext4Advice = "ext4 without a journal does not reuse an inode deleted less than a minute earlier, and every file it creates scans past " +
	"all such inodes at the start of its block group: creating a file costs more, by how much was deleted nearby in the last minute " +
	"(on the machine sealbench was built on, C01's 1,000 files took about 17 ms on a quiet disk and 170-220 ms, up to 320, amid a run's deletions). " +
	"The runner frees no inode of its own while it samples (warm-ups' files emptied, Sandboxes removed when the samples are all taken), " +
	"but what was deleted just before a run (a test suite, another run's teardown) slows the create-heavy cells (C01, C03-C05, C12) " +
	"in its first minutes; their A/A check shows the noise. A filesystem with a journal, or tmpfs, does not do this."

// ReportedKiB is how much memory the kernel has reported free to the
// hypervisor so far, where it says (page_reporting's reported_kib, which
// not every kernel exports).
func ReportedKiB(root string) (int64, bool) {
	v, err := strconv.ParseInt(readTrim(filepath.Join(root, reportedKiB)), 10, 64)
	return v, err == nil && v >= 0
}

// pageReporting says whether a balloon reports free pages: for a virtio
// balloon, from the features each bound device negotiated ("0110010..." a
// character per bit); Hyper-V's balloon may report them too, and does not
// say, so it leaves the answer unknown. balloon is whether one is bound.
func pageReporting(root string) (state string, balloon bool) {
	if _, err := os.Stat(filepath.Join(root, "sys/bus")); err != nil {
		return manifests.PageReportingUnknown, false
	}
	state = manifests.PageReportingInactive
	if hv, _ := filepath.Glob(filepath.Join(root, hypervBalloonDevices, "*-*")); len(hv) > 0 {
		state, balloon = manifests.PageReportingUnknown, true
	}
	devs, _ := filepath.Glob(filepath.Join(root, balloonDevices, "virtio*"))
	for _, d := range devs {
		balloon = true
		f := readTrim(filepath.Join(d, "features"))
		switch {
		case len(f) > virtioBalloonFReporting && f[virtioBalloonFReporting] == '1':
			return manifests.PageReportingActive, true
		case len(f) <= virtioBalloonFReporting:
			state = manifests.PageReportingUnknown
		}
	}
	return state, balloon
}

// bracketed is the word a sysfs choice list marks as chosen:
// "always [madvise] never" is madvise.
func bracketed(s string) string {
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// swapBytes is /proc/meminfo's SwapTotal in bytes.
func swapBytes(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "SwapTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil || kb < 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Advice says what page reporting does to a benchmark and what the
// protocol does about it: the doctor's and the report's words.
const Advice = "memory freed more than about 2 s earlier is handed back to the hypervisor, and writing into it again costs far more " +
	"than writing into memory just freed (130-190 ms more per 64 MiB on the machines sealbench was built on). " +
	"The protocol leaves every side in the same memory state: each warm-up's output is freed right after it, and a prefault makes " +
	"the pages a window will write resident just before it, on every side alike; each run's A/A check shows the noise that is left. " +
	"Do not change the host's balloon or page reporting for a benchmark: measure the machine as it is."
