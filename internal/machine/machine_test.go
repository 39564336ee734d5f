package machine

import (
	"os"
	"path/filepath"
	"reflect"
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
		{"ext4 with and without a journal", map[string]string{
			// As on the machine sealbench was built on: its root is ext4
			// with no journal; a second ext4 has one; a bind mount of
			// the root appears twice, a mount point with a space once.
			"proc/fs/ext4/vda/options":   "rw\n",
			"proc/fs/ext4/vdb/options":   "rw\n",
			"proc/fs/ext4/loop0/options": "rw\n",
			"proc/fs/jbd2/vdb-8/info":    "",
			"proc/self/mountinfo": "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n" +
				"23 22 254:16 / /data rw shared:2 - ext4 /dev/vdb rw\n" +
				"24 22 254:0 /var/lib/docker /var/lib/docker rw shared:1 - ext4 /dev/vda rw\n" +
				"25 22 254:0 / / rw shared:1 - ext4 /dev/vda rw\n" +
				"26 22 7:0 / /mnt/my\\040disk rw - ext4 /dev/loop0 rw\n" +
				"27 22 0:30 / /tmp rw - tmpfs tmpfs rw\n",
		}, manifests.Machine{PageReporting: manifests.PageReportingUnknown, UnjournaledExt4: []string{"/", "/var/lib/docker", "/mnt/my disk"}}, false},
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
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Probe = %+v, want %+v", got, tc.want)
			}
		})
	}
}
