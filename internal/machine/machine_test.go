package machine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sealbench/sealbench/manifests"
)

// tree writes files (path to contents) under a fresh root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestProbe(t *testing.T) {
	// As read off the machine sealbench was built on: a virtio balloon
	// with free page reporting, a kernel that exports reported_kib.
	reporting := map[string]string{
		"sys/bus/virtio/drivers/virtio_balloon/virtio0/features": "0110010100000000000000000000000010000000\n",
		"sys/module/page_reporting/parameters/reported_kib":      "18874368\n",
		"sys/kernel/mm/transparent_hugepage/enabled":             "always [madvise] never\n",
		"proc/meminfo": "MemTotal:       24683784 kB\nSwapTotal:       1048572 kB\nSwapFree:        1048572 kB\n",
	}
	for _, tc := range []struct {
		name   string
		files  map[string]string
		want   manifests.Machine
		kibSet bool
	}{
		{"page reporting active", reporting, manifests.Machine{PageReporting: manifests.PageReportingActive, Balloon: true,
			TransparentHugepages: "madvise", SwapBytes: 1048572 << 10}, true},
		{"a balloon without reporting", map[string]string{
			"sys/bus/virtio/drivers/virtio_balloon/virtio3/features": "0110000100000000",
			"sys/devices/system/cpu/cpu0/cpufreq/scaling_governor":   "performance\n",
			"proc/meminfo": "SwapTotal:       0 kB\n",
		}, manifests.Machine{PageReporting: manifests.PageReportingInactive, Balloon: true, CPUFreqGovernor: "performance"}, false},
		{"bare metal", map[string]string{
			"sys/bus/pci/drivers/nvme/uevent":            "",
			"sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never",
		}, manifests.Machine{PageReporting: manifests.PageReportingInactive, TransparentHugepages: "always"}, false},
		{"Hyper-V's balloon, which does not say", map[string]string{
			"sys/bus/vmbus/drivers/hv_balloon/525074dc-8985-46e2-8057-a307dc18a502/uevent": "",
		}, manifests.Machine{PageReporting: manifests.PageReportingUnknown, Balloon: true}, false},
		{"no /sys at all", map[string]string{"proc/meminfo": "SwapTotal: 4 kB\n"},
			manifests.Machine{PageReporting: manifests.PageReportingUnknown, SwapBytes: 4096}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Probe(tree(t, tc.files))
			if (got.ReportedKiBStart != nil) != tc.kibSet {
				t.Errorf("reportedKibStart = %v, want set %v", got.ReportedKiBStart, tc.kibSet)
			}
			if tc.kibSet && *got.ReportedKiBStart != 18874368 {
				t.Errorf("reportedKibStart = %d", *got.ReportedKiBStart)
			}
			got.ReportedKiBStart = nil
			if got != tc.want {
				t.Errorf("Probe = %+v, want %+v", got, tc.want)
			}
		})
	}
}
