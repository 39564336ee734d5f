// Package machine reads what the kernel of the machine it runs on does
// with free memory and CPU frequency: whether a balloon driver reports
// free pages to a hypervisor (and how much it has reported), transparent
// hugepages, swap, the CPU frequency governor. A benchmark has no
// business changing any of them, but it must know them: on a VM whose
// balloon does free page reporting, memory freed more than a couple of
// seconds earlier is handed back to the hypervisor, and writing into it
// again costs far more than writing into memory just freed.
//
// It only reads files under /sys and /proc (standard library only), so
// the bundle's runner and the doctor both link it.
package machine

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	return m
}

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
	"The protocol leaves every side in the same memory state: each warm-up's output is removed right after it, and a prefault makes " +
	"the pages a window will write resident just before it, on every side alike; each run's A/A check shows the noise that is left. " +
	"Do not change the host's balloon or page reporting for a benchmark: measure the machine as it is."
